import Dispatch
import Glibc
import Synchronization

/// Where every log line of the process goes: buffered per thread, written to one descriptor
/// (stderr) by a thread of its own, so a request never waits for a `write(2)` or for a slow reader
/// of stderr (docs/design.md §6).
///
/// ```
/// thread 0 ─append→ [buffer 0] ─┐
/// thread 1 ─append→ [buffer 1] ─┼─ writer thread: every `flushInterval`, or when a buffer passes
///    …                          │  `flushThreshold`, swaps each buffer out and writes them all with
/// thread N ─append→ [buffer N] ─┘  one write(2) per batch
/// ```
///
/// - Lines never interleave: a line goes into a buffer whole, and only the writer writes.
/// - Memory is bounded: a buffer holds at most `bufferCapacity` bytes. When the descriptor blocks
///   (a pipe nobody reads) buffers fill and further lines are dropped and counted
///   (``droppedLines``); the appending thread never waits.
/// - Nothing accepted is lost on a normal exit: ``standardError`` flushes in an `atexit` handler,
///   and ``flush(timeout:)`` writes out everything appended before it.
///
/// Each thread appends to its own buffer (by ``RuntimeThread/slot``), so the buffer's lock is
/// normally taken by that thread and, once per batch, the writer: no contention on the request path.
public final class LogSink: Sendable {
    public struct Configuration: Sendable {
        /// Thread buffers; threads beyond this share them (still correct, a little contention).
        public var bufferCount = 32
        /// Bytes one buffer holds before lines are dropped.
        public var bufferCapacity = 64 * 1024
        /// A buffer this full wakes the writer before its interval ends.
        public var flushThreshold = 16 * 1024
        /// The longest a line waits in a buffer while the descriptor accepts output.
        public var flushInterval: Duration = .milliseconds(10)

        public init() {}
    }

    private struct Buffer {
        var bytes: [UInt8] = []
        var lines = 0
    }

    /// One thread's buffer (a class: a `Mutex` cannot be an array element).
    private final class Slot: Sendable {
        let buffer = Mutex(Buffer())
    }

    private struct Control {
        /// Flushes asked for, and the last one the writer has completed.
        var requested = 0
        var completed = 0
        /// Threads waiting in ``flush(timeout:)``.
        var waiters = 0
        var closing = false
    }

    /// The process's stderr. Started on first use; flushed when the process exits normally.
    public static let standardError: LogSink = {
        let sink = LogSink(fd: 2)
        _ = atexit { LogSink.standardError.flush(timeout: .seconds(2)) }
        return sink
    }()

    private let fd: Int32
    private let configuration: Configuration
    private let buffers: [Slot]
    private let dropped = Atomic<Int>(0)
    private let closed = Atomic<Bool>(false)
    /// Set when a thread has woken the writer early, so only one thread pays for the wake-up.
    private let wakeRequested = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let control = Mutex(Control())
    private let passCompleted = DispatchSemaphore(value: 0)
    private let writerExited = DispatchSemaphore(value: 0)

    /// Starts the writer thread for `fd`. The caller keeps `fd` open until ``close(timeout:)``.
    public init(fd: Int32, configuration: Configuration = .init()) {
        self.fd = fd
        self.configuration = configuration
        self.buffers = (0..<max(configuration.bufferCount, 1)).map { _ in Slot() }
        do {
            try RuntimeThread.detach(name: "log-writer") { [self] in runWriter() }
        } catch {
            // No thread: lines are counted as dropped rather than written by the caller.
            closed.store(true, ordering: .releasing)
            writerExited.signal()
        }
    }

    /// Lines dropped so far: the buffers were full (the descriptor blocked), the descriptor failed,
    /// or the sink was closed.
    public var droppedLines: Int { dropped.load(ordering: .relaxed) }

    /// Appends one complete line (with its trailing newline); never blocks on the descriptor.
    public func write(_ line: UnsafeRawBufferPointer) {
        guard !line.isEmpty else { return }
        guard !closed.load(ordering: .relaxed) else {
            dropped.add(1, ordering: .relaxed)
            return
        }
        let capacity = configuration.bufferCapacity
        let size = buffers[RuntimeThread.slot % buffers.count].buffer.withLock { buffer -> Int? in
            guard buffer.bytes.count + line.count <= capacity else { return nil }
            buffer.bytes.append(contentsOf: line)
            buffer.lines += 1
            return buffer.bytes.count
        }
        guard let size else {
            dropped.add(1, ordering: .relaxed)
            return
        }
        if size >= configuration.flushThreshold, !wakeRequested.exchange(true, ordering: .relaxed) {
            wake.signal()
        }
    }

    /// Appends the line built in `line`.
    public func write(_ line: LogLine) {
        line.bytes.withUnsafeBytes { write($0) }
    }

    /// Writes out every line appended before this call; false if that took longer than `timeout`
    /// (the descriptor blocks).
    @discardableResult
    public func flush(timeout: Duration = .seconds(2)) -> Bool {
        let ticket = control.withLock { control in
            control.requested += 1
            control.waiters += 1
            return control.requested
        }
        defer { control.withLock { $0.waiters -= 1 } }
        wake.signal()
        let deadline = DispatchTime.after(timeout)
        while control.withLock({ $0.completed }) < ticket {
            if passCompleted.wait(timeout: deadline) == .timedOut {
                return control.withLock { $0.completed } >= ticket
            }
        }
        return true
    }

    /// Writes out what is buffered and stops the writer thread; later lines are dropped. False if
    /// the writer did not finish within `timeout`.
    @discardableResult
    public func close(timeout: Duration = .seconds(2)) -> Bool {
        control.withLock { $0.closing = true }
        closed.store(true, ordering: .releasing)
        wake.signal()
        return writerExited.wait(timeout: .after(timeout)) == .success
    }

    // MARK: Writer thread

    private func runWriter() {
        var spares = buffers.map { _ in [UInt8]() }
        var batch: [UInt8] = []
        while true {
            _ = wake.wait(timeout: .after(configuration.flushInterval))
            wakeRequested.store(false, ordering: .relaxed)
            // Read before the buffers are taken: every line appended before a flush request is in them.
            let (target, closing) = control.withLock { ($0.requested, $0.closing) }
            var lines = 0
            for index in buffers.indices {
                buffers[index].buffer.withLock { buffer in
                    guard buffer.lines > 0 else { return }
                    swap(&buffer.bytes, &spares[index])
                    lines += buffer.lines
                    buffer.lines = 0
                }
                if !spares[index].isEmpty {
                    batch.append(contentsOf: spares[index])
                    spares[index].removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty {
                if !writeAll(batch, giveUpAfterMilliseconds: closing ? 2000 : nil) {
                    dropped.add(lines, ordering: .relaxed)
                }
                batch.removeAll(keepingCapacity: batch.capacity <= 4 * configuration.bufferCapacity)
            }
            let waiters = control.withLock { control in
                control.completed = max(control.completed, target)
                return control.waiters
            }
            for _ in 0..<waiters { passCompleted.signal() }
            if closing { break }
        }
        writerExited.signal()
    }

    /// Writes all of `bytes`, waiting as long as the descriptor blocks (only this thread waits),
    /// or at most `giveUpAfterMilliseconds`. False if the bytes could not all be written.
    private func writeAll(_ bytes: [UInt8], giveUpAfterMilliseconds: Int? = nil) -> Bool {
        let deadline = giveUpAfterMilliseconds.map { ContinuousClock.now.advanced(by: .milliseconds($0)) }
        return bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                switch Self.write(fd, UnsafeRawBufferPointer(rebasing: buffer[offset...])) {
                case .written(let count):
                    offset += count
                case .wouldBlock:
                    if let deadline, ContinuousClock.now >= deadline { return false }
                    Self.waitWritable(fd, timeoutMilliseconds: 100)
                case .failed:
                    return false
                }
            }
            return true
        }
    }
}

// MARK: - The descriptor

extension LogSink {
    /// The outcome of one `write` to a descriptor that may be a terminal, a file or a pipe.
    fileprivate enum FileWrite {
        case written(Int)
        /// Non-blocking descriptor, full: wait with ``waitWritable(_:timeoutMilliseconds:)``.
        case wouldBlock
        /// Closed, broken or out of space: what was not written is lost.
        case failed(errno: Int32)
    }

    /// One `write(2)`, `EINTR` retried. `EBADF` is an answer here, not a bug: the process may have
    /// been started with its stderr closed.
    fileprivate static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> FileWrite {
        while true {
            let result = Glibc.write(fd, buffer.baseAddress, buffer.count)
            if result >= 0 { return .written(result) }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            default: return .failed(errno: code)
            }
        }
    }

    /// Waits until `fd` accepts output or `timeoutMilliseconds` pass.
    fileprivate static func waitWritable(_ fd: Int32, timeoutMilliseconds: Int32) {
        var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        _ = poll(&descriptor, 1, timeoutMilliseconds)
    }
}
