import Foundation
import HTTP1
import TestSupport
import Testing

@testable import ProfileService

@Suite struct CacheEntryTests {
    let profile = Profile(
        id: 42, username: "ada", displayName: "Ada \"the\" Countess\n\\", version: 7,
        updatedAt: "2026-11-21T10:00:00.000000Z")

    @Test func profileRoundTripKeepsTheJSONBytes() {
        let encoded = CacheEntry.encode(profile)
        guard case .profile(let version, let json)? = CacheEntry(decoding: encoded) else {
            Issue.record("did not decode")
            return
        }
        #expect(version == 7)
        #expect(Array(json) == profile.jsonBytes)
    }

    /// Test targets that talk to memcached directly use TestSupport's statement of the format.
    @Test func testSupportStatesTheSameFormatAndKey() {
        let encoded = CacheEntry.encode(profile)
        #expect(ProfileCacheEntries.entry(version: profile.version, json: profile.jsonBytes) == encoded)
        #expect(ProfileCacheEntries.version(of: encoded) == 7)
        #expect(ProfileCacheEntries.json(of: encoded) == profile.jsonBytes)
        #expect(ProfileCacheEntries.version(of: CacheEntry.encodeLease(token: 9)) == nil)
        #expect(ProfileCacheEntries.key(for: 42) == ProfileCacheConfiguration().key(for: 42))
    }

    @Test func absentRoundTripStandsForVersionZero() {
        #expect(CacheEntry(decoding: CacheEntry.encodedAbsent) == .absent)
        #expect(CacheEntry.absent.version == 0)
        #expect(CacheEntry.lease(token: 1).version == nil)
        #expect(CacheEntry(decoding: CacheEntry.encodedAbsent + [0]) == nil, "a longer record is not one")
        #expect(CacheEntry(decoding: [0xA1, 0x41, 0, 0, 0, 1]) == nil)
        #expect(ProfileCacheEntries.version(of: CacheEntry.encodedAbsent) == nil)
        #expect(ProfileCacheEntries.isAbsent(CacheEntry.encodedAbsent))
    }

    @Test func leaseRoundTrip() {
        let token: UInt64 = 0xDEAD_BEEF_0102_0304
        #expect(CacheEntry(decoding: CacheEntry.encodeLease(token: token)) == .lease(token: token))
    }

    @Test(arguments: [
        [UInt8](), Array(#"{"id":1}"#.utf8), [0xA2, 0x50, 0, 0, 0, 1, 0x7B], [0xA1, 0x58, 0, 0, 0, 1, 0x7B],
        [0xA1, 0x50, 0, 0, 0, 0, 0x7B], [0xA1, 0x50, 0x80, 0, 0, 1, 0x7B], [0xA1, 0x4C, 1, 2, 3],
    ])
    func anythingElseIsNotAnEntry(bytes: [UInt8]) {
        #expect(CacheEntry(decoding: bytes) == nil)
    }

    @Test func profileJSONIsValidAndEscaped() throws {
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(profile.jsonBytes)) as? [String: Any])
        #expect(object["id"] as? Int == 42)
        #expect(object["username"] as? String == "ada")
        #expect(object["display_name"] as? String == profile.displayName)
        #expect(object["version"] as? Int == 7)
        #expect(object["updated_at"] as? String == profile.updatedAt)
        #expect(Set(object.keys) == ["id", "username", "display_name", "version", "updated_at"])
    }

    @Test func problemDocumentsAreValidJSONWithTheirFields() throws {
        let problem = Problem(.versionConflict, detail: "at \"8\"", field: "version", current: profile)
        let response = problem.response
        #expect(response.status.code == 409)
        #expect(response.headers["Content-Type"] == "application/problem+json")
        #expect(response.headers["ETag"] == "\"7\"")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(object["status"] as? Int == 409)
        #expect(object["type"] as? String == "tag:profile-service,2026:version-conflict")
        #expect(object["detail"] as? String == "at \"8\"")
        #expect(object["field"] as? String == "version")
        #expect((object["current"] as? [String: Any])?["version"] as? Int == 7)
    }
}
