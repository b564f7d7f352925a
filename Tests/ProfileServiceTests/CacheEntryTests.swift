import Foundation
import HTTP1
import TestSupport
import Testing

@testable import ProfileService

@Suite struct CacheEntryTests {
    let profile: Profile = {
        var fields = ProfileFieldCatalog.standard.unsetFields
        fields.apply([.init(name: "bio", value: "Mathematician.\n\"Poetical science\"")])
        return Profile(
            id: 42, username: "ada", displayName: "Ada \"the\" Countess\n\\", fields: fields, version: 7,
            updatedAt: "2026-11-21T10:00:00.000000Z")
    }()

    @Test func profileRoundTripKeepsTheJSONBytes() {
        let encoded = CacheEntry.encode(profile)
        guard case .profile(let version, let json, let ownerMembers)? = CacheEntry(decoding: encoded, shape: ProfileFieldCatalog.standard.shape) else {
            Issue.record("did not decode")
            return
        }
        #expect(version == 7)
        #expect(Array(json) == profile.ownerJSON)
        #expect(ownerMembers.isEmpty, "no field is owner-only: the entry is the public view alone, as before")
    }

    /// With an owner-only field the entry holds both views ('O'): the public one complete, the
    /// owner's members after it; and its shape is not the shape of the same names all public.
    @Test func aProfileWithOwnerOnlyFieldsKeepsBothViewsInOneEntry() throws {
        let catalog = try ProfileFieldCatalog([
            ProfileFieldDeclaration(name: "bio", kind: .paragraph, maximumLength: 500),
            ProfileFieldDeclaration(name: "email", kind: .email, maximumLength: 254, readBy: .owner),
        ])
        let allPublic = try ProfileFieldCatalog([
            ProfileFieldDeclaration(name: "bio", kind: .paragraph, maximumLength: 500),
            ProfileFieldDeclaration(name: "email", kind: .email, maximumLength: 254),
        ])
        #expect(catalog.shape != allPublic.shape, "hiding a field makes entries written while it was public undecodable")
        var fields = catalog.unsetFields
        fields.apply([.init(name: "email", value: "ada@example.com")])
        let profile = Profile(id: 42, username: "ada", displayName: "Ada", fields: fields, version: 3, updatedAt: "2026-01-01T00:00:00.000000Z")
        #expect(String(decoding: profile.json.publicView, as: UTF8.self)
            == #"{"id":42,"username":"ada","display_name":"Ada","bio":null,"version":3,"updated_at":"2026-01-01T00:00:00.000000Z"}"#)
        #expect(String(decoding: profile.ownerJSON, as: UTF8.self)
            == #"{"id":42,"username":"ada","display_name":"Ada","bio":null,"version":3,"updated_at":"2026-01-01T00:00:00.000000Z","email":"ada@example.com"}"#)
        #expect(profile.entityTag(.anyone) == "\"3-public\"" && profile.entityTag(.owner) == "\"3\"")

        let encoded = CacheEntry.encode(profile)
        #expect(encoded[1] == UInt8(ascii: "O"))
        guard case .profile(3, let json, let ownerMembers)? = CacheEntry(decoding: encoded, shape: catalog.shape) else {
            Issue.record("did not decode")
            return
        }
        #expect(Array(json) == profile.json.publicView && Array(ownerMembers) == Array(profile.json.ownerMembers))
        #expect(CacheEntry(decoding: encoded, shape: allPublic.shape) == nil)
        #expect(CacheEntry(decoding: Array(encoded.prefix(14 + json.count)), shape: catalog.shape) == nil, "cut after the public view")
    }

    /// Test targets that talk to memcached directly use TestSupport's statement of the format.
    @Test func testSupportStatesTheSameFormatAndKey() {
        let encoded = CacheEntry.encode(profile)
        #expect(ProfileCacheEntries.entry(version: profile.version, json: profile.ownerJSON) == encoded)
        #expect(ProfileCacheEntries.version(of: encoded) == 7)
        #expect(ProfileCacheEntries.json(of: encoded) == profile.ownerJSON)
        #expect(ProfileCacheEntries.version(of: CacheEntry.encodeLease(token: 9)) == nil)
        #expect(ProfileCacheEntries.key(for: 42) == ProfileCacheConfiguration().key(for: 42))
    }

    /// An entry written under other declared fields is not this instance's to serve: to it, it is
    /// undecodable (replaced from PostgreSQL, or deleted). One of a release before declared fields
    /// is the shape of none.
    @Test func anEntryOfAnotherShapeIsNotDecoded() throws {
        let encoded = CacheEntry.encode(profile)
        let pronouns = try ProfileFieldCatalog(
            ProfileFieldCatalog.standard.declarations + [ProfileFieldDeclaration(name: "pronouns", kind: .text, maximumLength: 40)])
        #expect(pronouns.shape != ProfileFieldCatalog.standard.shape)
        #expect(CacheEntry(decoding: encoded, shape: pronouns.shape) == nil)
        #expect(CacheEntry(decoding: encoded, shape: ProfileFieldCatalog.none.shape) == nil)
        let fieldless = [0xA1, UInt8(ascii: "P"), 0, 0, 0, 3] + Array(#"{"id":42}"#.utf8)
        #expect(CacheEntry(decoding: fieldless, shape: ProfileFieldCatalog.none.shape) == .profile(version: 3, json: fieldless[6...], ownerMembers: []))
        #expect(CacheEntry(decoding: fieldless, shape: ProfileFieldCatalog.standard.shape) == nil)
        #expect(ProfileCacheEntries.shape(of: ProfileCacheEntries.standardFields) == ProfileFieldCatalog.standard.shape)
    }

    @Test func absentRoundTripStandsForVersionZero() {
        #expect(CacheEntry(decoding: CacheEntry.encodedAbsent, shape: ProfileFieldCatalog.standard.shape) == .absent)
        #expect(CacheEntry.absent.version == 0)
        #expect(CacheEntry.lease(token: 1).version == nil)
        #expect(CacheEntry(decoding: CacheEntry.encodedAbsent + [0], shape: ProfileFieldCatalog.standard.shape) == nil, "a longer record is not one")
        #expect(CacheEntry(decoding: [0xA1, 0x41, 0, 0, 0, 1], shape: ProfileFieldCatalog.standard.shape) == nil)
        #expect(ProfileCacheEntries.version(of: CacheEntry.encodedAbsent) == nil)
        #expect(ProfileCacheEntries.isAbsent(CacheEntry.encodedAbsent))
    }

    @Test func leaseRoundTrip() {
        let token: UInt64 = 0xDEAD_BEEF_0102_0304
        #expect(CacheEntry(decoding: CacheEntry.encodeLease(token: token), shape: ProfileFieldCatalog.standard.shape) == .lease(token: token))
    }

    @Test(arguments: [
        [UInt8](), Array(#"{"id":1}"#.utf8), [0xA2, 0x50, 0, 0, 0, 1, 0x7B], [0xA1, 0x58, 0, 0, 0, 1, 0x7B],
        [0xA1, 0x50, 0, 0, 0, 0, 0x7B], [0xA1, 0x50, 0x80, 0, 0, 1, 0x7B], [0xA1, 0x4C, 1, 2, 3],
    ])
    func anythingElseIsNotAnEntry(bytes: [UInt8]) {
        #expect(CacheEntry(decoding: bytes, shape: ProfileFieldCatalog.standard.shape) == nil)
    }

    @Test func profileJSONIsValidAndEscaped() throws {
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(profile.ownerJSON)) as? [String: Any])
        #expect(object["id"] as? Int == 42)
        #expect(object["username"] as? String == "ada")
        #expect(object["display_name"] as? String == profile.displayName)
        #expect(object["version"] as? Int == 7)
        #expect(object["updated_at"] as? String == profile.updatedAt)
        #expect(Set(object.keys) == ["id", "username", "display_name", "bio", "avatar_url", "location", "website", "version", "updated_at"])
        #expect(object["bio"] as? String == profile.fields["bio"])
        #expect(object["website"] is NSNull, "an unset field is null")
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
