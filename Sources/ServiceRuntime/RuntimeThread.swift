import CLinuxShims
import Glibc
import Synchronization

/// The fixed threads the service runs on (the event loop, the workers, the log writer): started
/// detached, outside the Swift concurrency pool, which must never block on a socket or a lock.
public enum RuntimeThread {
    /// `pthread_create` refused (`code` is its errno value, e.g. `EAGAIN` at the thread limit).
    public struct StartError: Error, CustomStringConvertible {
        public let code: Int32
        public var description: String { "pthread_create failed: errno \(code)" }
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts a detached pthread named `name` (its first 15 bytes: what `top -H` shows) running `body`.
    public static func detach(name: String, _ body: @escaping @Sendable () -> Void) throws(StartError) {
        let context = Unmanaged.passRetained(Body {
            cls_set_current_thread_name(name)
            body()
        }).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { raw in
                guard let raw else { return nil }
                Unmanaged<Body>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw StartError(code: result)
        }
        pthread_detach(thread)
    }

    /// A small number unique to the calling thread (0, 1, 2, … in order of first call), kept in a
    /// pthread key: ``LogSink`` gives each thread a buffer of its own with it.
    public static var slot: Int {
        if let raw = pthread_getspecific(slotKey) { return Int(bitPattern: raw) - 1 }
        let slot = nextSlot.add(1, ordering: .relaxed).oldValue
        _ = pthread_setspecific(slotKey, UnsafeRawPointer(bitPattern: slot + 1))
        return slot
    }

    private static let slotKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create")
        return key
    }()
    private static let nextSlot = Atomic<Int>(0)
}
