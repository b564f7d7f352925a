import Foundation
import Synchronization
import ProfileClient
import Testing
import TestSupport

/// A list of 2,000 rows scrolled for 30 s, as a SwiftUI `List` of ``ObservableProfiles`` rows does,
/// against the built service at its defaults (`--max-streams-per-client` 32) while another client
/// writes: every write reaches the rows that show it, and no stream is refused.
@MainActor
@Suite(.serialized, .requires(.postgres, .memcached), .timeLimit(.minutes(3))) struct ScrollingServiceTests {
    static let rows = 2_000
    static let screen = 100
    /// Rows that scroll in (and out) each moment: a fling.
    static let step = 20

    @Test func twoThousandRowsScrolledFor30SecondsSeeEveryWriteWithNoStreamRefused() async throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let base = Int64.random(in: 5_000_000_000...6_000_000_000) * 10_000
        let ids = Array(base..<(base + Int64(Self.rows)))
        try ProfileListObservationServiceTests.psql(
            "INSERT INTO user_profiles (id, username, display_name) SELECT g, 'sc' || g, 'Row ' || g "
                + "FROM generate_series(\(ids.first!), \(ids.last!)) AS g")
        let admin = try ProfileListObservationServiceTests.admin(service)
        let profiles = ObservableProfiles(client: ProfileClient(configuration: ProfileClientConfiguration(baseURL: service.url)))

        // The writer: PUTs of random rows, one at a time, for as long as the screen scrolls.
        let written = LockedVersions()
        let writer = Task.detached {
            var failures: [ProfileClientError] = []
            while !Task.isCancelled {
                let id = ids.randomElement()!
                let version = written.version(of: id)
                do throws(ProfileClientError) {
                    let profile = try await admin.edit(id: id, ProfileChanges(displayName: "Written \(version + 1)"), expectedVersion: version)
                    written.record(profile.version, of: id)
                } catch .cancelled {
                    break  // the scrolling is over
                } catch {
                    failures.append(error)
                }
            }
            return failures
        }

        var rows: [Int64: Task<Void, Never>] = [:]
        func show(_ range: Range<Int>) {
            let wanted = Set(range.map { ids[$0 % ids.count] })
            for (id, row) in rows where !wanted.contains(id) {
                row.cancel()
                rows[id] = nil
            }
            for id in wanted where rows[id] == nil { rows[id] = Task { await profiles.follow(id) } }
        }

        var top = 0
        var checks = 0
        var behind: [Int64] = []
        var slowest: Duration = .zero
        let end = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < end {
            // A second of flinging, then the screen rests on a page: every row on it must show
            // the newest version written before the rest began.
            let second = ContinuousClock.now + .seconds(1)
            while ContinuousClock.now < second {
                top += Self.step
                show(top..<(top + Self.screen))
                try await Task.sleep(for: .milliseconds(50))
            }
            let onScreen = (top..<(top + Self.screen)).map { ids[$0 % ids.count] }
            let expected = Dictionary(uniqueKeysWithValues: onScreen.map { ($0, written.version(of: $0)) })
            let rested = ContinuousClock.now
            let caughtUp = await ObservableProfilesServiceTests.wait {
                onScreen.allSatisfy { (profiles.profile($0)?.version ?? 0) >= expected[$0]! }
            }
            slowest = max(slowest, ContinuousClock.now - rested)
            checks += 1
            if !caughtUp { behind += onScreen.filter { (profiles.profile($0)?.version ?? 0) < expected[$0]! } }
        }
        writer.cancel()
        let writeFailures = await writer.value

        // Closing the screen: every row's task ends on the main actor.
        let closing = ContinuousClock.now
        for row in rows.values { row.cancel() }
        for row in rows.values { await row.value }
        let closed = ContinuousClock.now - closing

        let metrics = try service.metrics()
        let refused = metrics.value("profile_service_sse_subscribers_refused_per_client_total") ?? 0
        print(
            "scrolling: \(Self.rows) rows, \(top / Self.step) moments of \(Self.step) rows, \(written.count) PUTs "
                + "(failed: \(writeFailures.prefix(3))), \(checks) rests, slowest catch-up \(slowest), closing \(rows.count) rows "
                + "\(closed) on the main actor, streams refused \(refused)")
        #expect(behind.isEmpty, "rows behind a write they show: \(behind.prefix(10))")
        #expect(written.count > 100, "the writer wrote")
        #expect(writeFailures.isEmpty, "the only writer's edits never fail: \(writeFailures.prefix(3))")
        #expect(refused == 0, "no 429")
    }
}

/// The newest version written per id, shared by the writer and the checks.
final class LockedVersions: Sendable {
    private let versions = Mutex<[Int64: Int32]>([:])

    func version(of id: Int64) -> Int32 { versions.withLock { $0[id] ?? 1 } }
    func record(_ version: Int32, of id: Int64) { versions.withLock { $0[id] = max($0[id] ?? 1, version) } }
    var count: Int { versions.withLock { $0.values.reduce(0) { $0 + Int($1) - 1 } } }
}
