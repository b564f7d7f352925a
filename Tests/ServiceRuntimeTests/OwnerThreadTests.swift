import Foundation
import ServiceRuntime
import Testing

/// The owner-thread rule of every C handle's owner: the first check binds the thread, a check
/// from any other thread stops the process.
@Suite struct OwnerThreadTests {
    /// Runs `body` on a thread of its own and waits for it.
    static func onAnotherThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        nonisolated(unsafe) var value: T?
        let done = DispatchSemaphore(value: 0)
        Thread {
            value = body()
            done.signal()
        }.start()
        done.wait()
        return value!
    }

    @Test func theFirstCheckBindsTheThread() {
        var ownerThread = OwnerThread("resource")
        nonisolated(unsafe) let unbound = ownerThread
        #expect(Self.onAnotherThread { unbound.isCurrentThreadAllowed })

        ownerThread.check()
        ownerThread.check()
        #expect(ownerThread.isCurrentThreadAllowed)
        nonisolated(unsafe) let bound = ownerThread
        #expect(!Self.onAnotherThread { bound.isCurrentThreadAllowed })
    }

    @Test func aCheckerMadeOnOneThreadBelongsToItsFirstUser() {
        nonisolated(unsafe) var ownerThread = OwnerThread("resource")
        #expect(Self.onAnotherThread {
            ownerThread.check()
            return ownerThread.isCurrentThreadAllowed
        })
        #expect(!ownerThread.isCurrentThreadAllowed)
    }

    @Test func aCheckFromASecondThreadStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            var ownerThread = OwnerThread("resource")
            ownerThread.check()
            nonisolated(unsafe) let shared = ownerThread
            let done = DispatchSemaphore(value: 0)
            Thread {
                var checker = shared
                checker.check()  // precondition: off its owner thread
                done.signal()
            }.start()
            done.wait()
        }
    }
}
