import Foundation
import MemcachedClient
import Testing
import ProfileServiceTesting

@testable import ProfileService

/// Lookups by handle (docs/design.md §12) in memory: a handle's entry is a hint the profile
/// proves, renames and deletions keep the old handle for its owner, and a handle's record of
/// "no one" is repaired when someone takes it.
@Suite struct HandleLookupTests {
    private func handle(_ username: String) throws -> ProfileHandle { try #require(ProfileHandle(username: username)) }

    private func lookUp(_ username: String, _ repository: ProfileRepository, floor: Int32? = nil) throws -> ProfileRepository.HandleAnswer {
        try repository.lookUp(try handle(username), minVersion: floor)
    }

    private func rename(_ id: Int64, to username: String, _ repository: ProfileRepository) throws -> Profile {
        guard case .updated(let renamed) = try repository.update(id: id, changes: ProfileChanges(username: username), expectedVersion: nil)
        else { throw TestFailure("rename of \(id) failed") }
        return renamed
    }

    @Test func aLookupAnswersTheHolderInAnySpellingAndThenFromMemcachedAlone() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)

        guard case .profile(let id, let first) = try lookUp(profile.username.uppercased(), repository) else {
            throw TestFailure("no profile for \(profile.username.uppercased())")
        }
        #expect(id == profile.id && first.json == profile.json)
        let asked = shared.statistics.count(.handleDatabaseRead)
        guard case .profile(id, _) = try lookUp(profile.username, repository) else { throw TestFailure("second lookup") }
        #expect(shared.statistics.count(.handleDatabaseRead) == asked, "the second lookup is the entry and the profile's")
        #expect(shared.statistics.count(.handleHit) >= 1)
    }

    @Test func theRenamerFindsTheNewHandleAtOnceAndTheOldOneRedirects() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        let newName = "n\(profile.id)"
        // Both handles cached first: the old one as held, the new one as held by no one.
        _ = try lookUp(profile.username, repository)
        guard case .nobody = try lookUp(newName, repository) else { throw TestFailure("\(newName) is nobody's yet") }

        let renamed = try rename(profile.id, to: newName, repository)
        guard case .profile(profile.id, let found) = try lookUp(newName, repository) else { throw TestFailure("the new handle") }
        #expect(found.version == renamed.version)
        guard case .moved(profile.id, let username) = try lookUp(profile.username, repository) else { throw TestFailure("the old handle") }
        #expect(username == newName)
    }

    @Test func aHandleTakenBehindTheCacheIsFoundOnceTheFeedRepairsIt() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        let newName = "f\(profile.id)"
        guard case .nobody = try lookUp(newName, repository) else { throw TestFailure("\(newName) is nobody's yet") }

        // A rename in SQL: the service's cache knows nothing of it.
        guard case .updated(let renamed) = try backends.store.update(id: profile.id, changes: ProfileChanges(username: newName), expectedVersion: nil)
        else { throw TestFailure("rename") }
        guard case .nobody = try lookUp(newName, repository) else {
            throw TestFailure("without the repair the record of no one still answers (the control)")
        }

        let change = ProfileChange.changed(id: profile.id, version: renamed.version, row: renamed)
        repository.refresh(after: change)
        #expect(repository.repairHandles(after: [change]).isEmpty)
        guard case .profile(profile.id, _) = try lookUp(newName, repository) else { throw TestFailure("after the repair") }
        #expect(repository.repairHandles(after: [change]).isEmpty, "a repair again leaves the holder's entry")
        guard case .profile(profile.id, _) = try lookUp(newName, repository) else { throw TestFailure("after a second repair") }
    }

    @Test func aFloorReadsPastARecordOfNoOneAndReplacesIt() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let repository = backends.repository(shared)
        let newName = "m\(profile.id)"
        guard case .nobody = try lookUp(newName, repository) else { throw TestFailure("\(newName) is nobody's yet") }
        guard case .updated(let renamed) = try backends.store.update(id: profile.id, changes: ProfileChanges(username: newName), expectedVersion: nil)
        else { throw TestFailure("rename") }

        // The renamer's read-your-writes: its floor asks more than a record of no one proves.
        guard case .profile(profile.id, let found) = try lookUp(newName, repository, floor: renamed.version) else { throw TestFailure("floor") }
        #expect(found.version == renamed.version)
        guard case .profile(profile.id, _) = try lookUp(newName, repository) else { throw TestFailure("stored over the record") }
    }

    @Test func anOldHandlesEntryNeverAnswersTheProfileThatGaveItUp() throws {
        let shared = ProfileCacheShared()
        // A database of its own: it shortens the reservation, which other tests rely on.
        let backends = try InMemoryBackends(cluster: InMemoryCache(nodes: 2), database: InMemoryDatabase())
        let first = try backends.seed()
        let second = try backends.seed()
        let repository = backends.repository(shared)
        let shared_name = first.username
        guard case .profile(first.id, _) = try lookUp(shared_name, repository) else { throw TestFailure("first holds it") }

        // Behind the cache, with no reservation: the first renames away, the second takes the
        // name; only the profiles' entries are repaired (as the feed does), not the handle's.
        backends.store.database.setHandleReservation(milliseconds: 0)
        guard case .updated(let away) = try backends.store.update(id: first.id, changes: ProfileChanges(username: "a\(first.id)"), expectedVersion: nil),
            case .updated(let taken) = try backends.store.update(id: second.id, changes: ProfileChanges(username: shared_name), expectedVersion: nil)
        else { throw TestFailure("renames") }
        _ = repository.refresh(after: [.changed(id: away.id, version: away.version, row: away), .changed(id: taken.id, version: taken.version, row: taken)])

        guard case .profile(let id, let answer) = try lookUp(shared_name, repository) else { throw TestFailure("the second holds it") }
        #expect(id == second.id && answer.username == shared_name)
        guard case .profile(second.id, _) = try lookUp(shared_name, repository) else { throw TestFailure("the entry was replaced") }
    }

    @Test func aDeletedProfilesHandleIsKeptForItAndAnswersNobody() throws {
        let shared = ProfileCacheShared()
        let backends = try InMemoryBackends()
        let profile = try backends.seed()
        let other = try backends.seed()
        let repository = backends.repository(shared)
        _ = try lookUp(profile.username, repository)

        #expect(try repository.delete(id: profile.id, expectedVersion: nil) == .deleted(version: profile.version))
        guard case .nobody = try lookUp(profile.username, repository) else { throw TestFailure("a deleted holder") }
        #expect(throws: ProfileStoreError.usernameTaken) {
            try repository.update(id: other.id, changes: ProfileChanges(username: profile.username), expectedVersion: nil)
        }
    }

    @Test func aProfilesUsernameIsReadFromItsJSONInPlace() throws {
        let ada = try handle("ada")
        func representation(_ json: String) -> ProfileRepository.Representation {
            ProfileRepository.Representation(version: 1, json: ProfileJSON(publicView: Array(json.utf8), ownerMembers: []), cacheOutcome: .hit)
        }
        let spelled = representation(#"{"id":17,"username":"AdA","display_name":"x"}"#)
        #expect(spelled.username == "AdA" && spelled.carries(ada))
        #expect(!representation(#"{"id":17,"username":"adam","display_name":"x"}"#).carries(ada))
        #expect(!representation(#"{"id":17,"username":"ad","display_name":"x"}"#).carries(ada))
        let escaped = representation(#"{"id":17,"username":"a\"da","display_name":"x"}"#)
        #expect(escaped.username == nil && !escaped.carries(ada), "a name with escapes is no handle")
        #expect(representation(#"{"display_name":"ada","username":"ada"}"#).username == nil, "only the service's order")
    }

    @Test func handleEntriesRoundTripAndNeverReadAsProfiles() throws {
        let bytes = CacheEntry.encodeHandle(id: 42, reservedUntil: 1_800_000_000_000)
        #expect(CacheEntry(decoding: bytes, shape: 0) == .handle(id: 42, reservedUntil: 1_800_000_000_000))
        #expect(CacheEntry(decoding: bytes, shape: 0)?.version == nil)
        #expect(CacheEntry(decoding: Array(bytes.dropLast()), shape: 0) == nil)
        #expect(CacheEntry(decoding: CacheEntry.encodeHandle(id: 0, reservedUntil: 0), shape: 0) == nil)
    }
}
