import Foundation

/// A value behind a lock, for the client's state shared between threads (and the package's
/// `ProfileClientTesting`).
///
/// The client builds for every platform the package declares, down to iOS 16 and macOS 13, where
/// `Synchronization.Mutex` (iOS 18, macOS 15) does not exist; `NSLock` exists wherever Foundation
/// does. Replace this type with `Mutex` once the package's minimums reach iOS 18 and macOS 15.
///
/// `@unchecked Sendable`: `value` is read and written only inside ``withLock(_:)``, under `lock`.
package final class LockedValue<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value while holding the lock; keep it short and never suspend in it.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
