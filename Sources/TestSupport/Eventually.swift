import Foundation

/// Waiting for an event instead of sleeping a fixed time: the condition is polled until it holds
/// or the deadline passes, so a fast machine does not wait and a slow one does not flake.
public enum Eventually {
    /// Polls `condition` every `interval` until it is true (returns true) or `timeout` has passed
    /// (returns false).
    public static func wait(
        timeout: Duration = .seconds(10), interval: Duration = .milliseconds(20), _ condition: () throws -> Bool
    ) rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try condition() { return true }
            if ContinuousClock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: interval / .seconds(1))
        }
    }

    /// The same for async tests: suspends between polls instead of blocking the thread.
    public static func waitAsync(
        timeout: Duration = .seconds(10), interval: Duration = .milliseconds(20),
        _ condition: () async throws -> Bool
    ) async rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try await condition() { return true }
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: interval)
        }
    }
}
