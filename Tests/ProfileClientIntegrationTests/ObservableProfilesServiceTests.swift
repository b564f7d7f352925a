import Foundation
import ProfileClient
import Testing
import TestSupport

/// ``ObservableProfiles`` as a SwiftUI list uses it — a row per profile, each row following its
/// id — against the built service at its defaults (`--max-streams-per-client` 32).
@MainActor
@Suite(.serialized, .requires(.postgres, .memcached), .timeLimit(.minutes(2))) struct ObservableProfilesServiceTests {
    /// Waits (up to 20 s) until `done` holds, letting the main actor run meanwhile.
    static func wait(until done: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while !done() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    @Test func twoHundredRowsGetEveryWriteWithNoStreamRefused() async throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let admin = try ProfileListObservationServiceTests.admin(service)
        let members = try await ProfileListObservationServiceTests.createMembers(200, with: admin)
        let reader = ProfileClient(configuration: ProfileClientConfiguration(baseURL: service.url))
        let profiles = ObservableProfiles(client: reader)
        let rows = members.map { member in Task { await profiles.follow(member.id) } }
        defer { for row in rows { row.cancel() } }
        #expect(
            await Self.wait { members.allSatisfy { profiles.profile($0.id)?.version == 1 } },
            "every row shows its profile from the stream")

        for member in members {
            _ = try await admin.edit(id: member.id, ProfileChanges(displayName: "Written"), expectedVersion: 1)
        }
        let all = await Self.wait { members.allSatisfy { profiles.profile($0.id)?.version == 2 } }
        let behind = members.filter { profiles.profile($0.id)?.version != 2 }.map(\.id)
        #expect(all, "every PUT's event reached its row; not: \(behind.prefix(10))")
        #expect(members.allSatisfy { profiles.entry($0.id)?.failure == nil })
        let metrics = try service.metrics()
        #expect((metrics.value("profile_service_sse_subscribers_refused_per_client_total") ?? 0) == 0, "no 429")
        let opened = metrics.value("profile_service_sse_subscribers") ?? -1
        #expect(opened >= 1 && opened <= 2, "one list stream (two while it is replaced), not one per row: \(opened)")
    }
}
