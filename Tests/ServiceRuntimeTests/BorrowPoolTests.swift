import Dispatch
import Foundation
import ServiceRuntime
import Synchronization
import Testing

/// The pool the workers borrow PostgreSQL connections from: never more objects than its
/// capacity, never one object with two borrowers, each object's thread check handed over.
@Suite struct BorrowPoolTests {
    /// An object that counts how many borrowers use it at once.
    final class Resource: @unchecked Sendable {
        let number: Int
        var users = 0
        var ownerThread = OwnerThread("Resource")
        init(number: Int) { self.number = number }
    }

    @Test func makesObjectsOnlyWhenNeededAndReusesTheLastReturned() {
        let made = Atomic<Int>(0)
        let pool = BorrowPool<Resource>(capacity: 4, make: { Resource(number: made.add(1, ordering: .relaxed).newValue) })
        #expect(pool.made == 0)
        let first = pool.borrow { $0.number }
        let second = pool.borrow { $0.number }
        #expect(first == 1 && second == 1)
        #expect(pool.made == 1)
        let inner = pool.borrow { outer in pool.borrow { inner in [outer.number, inner.number] } }
        #expect(inner == [1, 2])
        #expect(pool.made == 2)
    }

    @Test func manyThreadsNeverShareAnObjectNorExceedTheCapacity() {
        let made = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        let pool = BorrowPool<Resource>(
            capacity: 3, make: { Resource(number: made.add(1, ordering: .relaxed).newValue) },
            handOff: { $0.ownerThread.release() })
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            for _ in 0..<200 {
                pool.borrow { resource in
                    resource.ownerThread.check()  // stops the process if two threads held it
                    resource.users += 1
                    if resource.users != 1 { overlaps.add(1, ordering: .relaxed) }
                    usleep(10)
                    resource.users -= 1
                }
            }
        }
        #expect(overlaps.load(ordering: .relaxed) == 0)
        #expect(pool.made <= 3)
        #expect(made.load(ordering: .relaxed) == pool.made)
    }

    @Test func borrowIfFreeAnswersNilWhileEveryObjectIsLent() {
        let pool = BorrowPool<Resource>(capacity: 1, make: { Resource(number: 1) })
        let nested = pool.borrow { _ in pool.borrowIfFree { $0.number } }
        #expect(nested == nil)
        #expect(pool.borrowIfFree { $0.number } == 1)
    }

    @Test func aBorrowThatThrowsGivesTheObjectBack() {
        struct Failure: Error {}
        let pool = BorrowPool<Resource>(capacity: 1, make: { Resource(number: 1) })
        #expect(throws: Failure.self) { try pool.borrow { _ throws(Failure) in throw Failure() } }
        #expect(pool.borrowIfFree { $0.number } == 1)
    }

    @Test func aWaitingBorrowerGetsTheObjectWhenItComesBack() {
        let pool = BorrowPool<Resource>(capacity: 1, make: { Resource(number: 1) }, handOff: { $0.ownerThread.release() })
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let waited = Atomic<Bool>(false)
        Thread {
            pool.borrow { resource in
                resource.ownerThread.check()
                holding.signal()
                release.wait()
            }
        }.start()
        holding.wait()
        Thread {
            pool.borrow { resource in resource.ownerThread.check() }
            waited.store(true, ordering: .relaxed)
            done.signal()
        }.start()
        #expect(done.wait(timeout: .now() + .milliseconds(50)) == .timedOut)
        release.signal()
        #expect(done.wait(timeout: .now() + .seconds(5)) == .success)
        let borrowed = waited.load(ordering: .relaxed)
        #expect(borrowed)
    }

    @Test func forEachIdleVisitsOnlyIdleObjects() {
        let made = Atomic<Int>(0)
        let pool = BorrowPool<Resource>(capacity: 2, make: { Resource(number: made.add(1, ordering: .relaxed).newValue) })
        var visited: [Int] = []
        pool.borrow { outer in
            _ = pool.borrow { $0.number }
            pool.forEachIdle { visited.append($0.number) }
            _ = outer
        }
        #expect(visited == [2])
    }
}
