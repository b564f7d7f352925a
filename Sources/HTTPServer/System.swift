// Every system call of the server, aliased and wrapped in one place (as NIO's `System.swift`):
// `EINTR` is retried, `EAGAIN`/`EWOULDBLOCK` becomes `.wouldBlock`, `EBADF`/`EFAULT` are our bugs
// and trap, anything else throws ``IOError``. The rest of the module never calls Glibc directly.
import CLinuxShims
import Glibc

private let sysSocket = Glibc.socket
private let sysSetsockopt = Glibc.setsockopt
private let sysBind = Glibc.bind
private let sysListen = Glibc.listen
private let sysGetsockname = Glibc.getsockname
private let sysAccept = Glibc.accept
private let sysFcntl: @Sendable (Int32, Int32, Int32) -> Int32 = Glibc.fcntl
private let sysRead = Glibc.read
private let sysSend = Glibc.send
private let sysClose = Glibc.close
private let sysShutdown = Glibc.shutdown
private let sysEpollCreate1 = CLinuxShims.epoll_create1
private let sysEpollCtl = CLinuxShims.epoll_ctl
private let sysEpollWait = CLinuxShims.epoll_wait
private let sysEventfd = CLinuxShims.eventfd
private let sysWrite = Glibc.write
private let sysGetrlimit = Glibc.getrlimit
private let sysSetrlimit = Glibc.setrlimit

/// Runs a system call, retrying on `EINTR`.
/// - Parameter nonBlocking: the call is on a non-blocking descriptor, so `EAGAIN`/`EWOULDBLOCK`
///   is an answer (`.wouldBlock`: try again when epoll says so), not an error. (swift-nio calls
///   the same parameter `blocking`, true there for what is `nonBlocking: true` here.)
@inline(__always)
private func syscall<Result: FixedWidthInteger>(
    nonBlocking: Bool, where reason: @autoclosure () -> String, _ body: () -> Result
) throws(IOError) -> IOResult<Result> {
    while true {
        let result = body()
        if result >= 0 { return .processed(result) }
        let code = errno
        switch code {
        case EINTR:
            continue
        case EAGAIN, EWOULDBLOCK:
            if nonBlocking { return .wouldBlock }
            throw IOError(errnoCode: code, reason: reason())
        case EBADF, EFAULT:
            preconditionFailure("unacceptable errno \(code) (\(reason())): a bug in the server")
        default:
            throw IOError(errnoCode: code, reason: reason())
        }
    }
}

/// Thin, typed wrappers over the system calls the server uses.
enum System {
    // MARK: Process

    /// Writes to a peer that has gone raise SIGPIPE unless ignored; `send` also passes `MSG_NOSIGNAL`.
    static func ignoreSIGPIPE() {
        _ = Glibc.signal(SIGPIPE, SIG_IGN)
    }

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the new soft limit.
    @discardableResult
    static func raiseFileDescriptorLimit() -> UInt64 {
        var limit = rlimit()
        guard sysGetrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if sysSetrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 {
                return UInt64(raised.rlim_cur)
            }
        }
        return UInt64(limit.rlim_cur)
    }

    /// Gives the CPU to another runnable thread, if any.
    static func yield() {
        _ = sched_yield()
    }

    // MARK: Sockets

    /// A non-blocking, close-on-exec IPv4 listening socket with `SO_REUSEADDR`.
    /// - Returns: the descriptor and the bound port (useful with port 0).
    static func makeListener(host: String, port: Int, backlog: Int32) throws(IOError) -> (fd: Int32, port: Int) {
        guard
            case .processed(let fd) = try syscall(
                nonBlocking: false, where: "socket",
                {
                    sysSocket(
                        AF_INET,
                        Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                })
        else { preconditionFailure() }
        do throws(IOError) {
            var one: Int32 = 1
            _ = try syscall(nonBlocking: false, where: "setsockopt(SO_REUSEADDR)") {
                sysSetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
            let resolvedHost = host == "localhost" ? "127.0.0.1" : host
            guard inet_pton(AF_INET, resolvedHost, &address.sin_addr) == 1 else {
                throw IOError(errnoCode: EINVAL, reason: "invalid IPv4 address \(host)")
            }
            _ = try syscall(nonBlocking: false, where: "bind \(host):\(port)") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sysBind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            _ = try syscall(nonBlocking: false, where: "listen") { sysListen(fd, backlog) }
            var bound = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = try syscall(nonBlocking: false, where: "getsockname") {
                withUnsafeMutablePointer(to: &bound) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sysGetsockname(fd, $0, &length) }
                }
            }
            return (fd, Int(UInt16(bigEndian: bound.sin_port)))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Accepts one connection: its descriptor (non-blocking, close-on-exec, `TCP_NODELAY` set) and
    /// the peer's address in text (`127.0.0.1`, `::1`; `""` when it cannot be read), for the
    /// per-client limits.
    ///
    /// `accept4(SOCK_NONBLOCK | SOCK_CLOEXEC)` would save two `fcntl` calls per connection, but Swift's
    /// Glibc module is built without `_GNU_SOURCE` and does not export it; a `CLinuxShims_accept4`
    /// wrapper in `CLinuxShims/shim.c` (as NIO's `CNIOLinux_accept4`) would remove this workaround.
    /// Connections are long-lived (keep-alive), so the cost is small.
    static func accept(_ listener: Int32) throws(IOError) -> IOResult<(fd: Int32, peer: String)> {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = try syscall(nonBlocking: true, where: "accept") {
            withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sysAccept(listener, $0, &length) }
            }
        }
        guard case .processed(let fd) = result else { return .wouldBlock }
        _ = sysFcntl(fd, F_SETFD, FD_CLOEXEC)
        let flags = sysFcntl(fd, F_GETFL, 0)
        _ = sysFcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var one: Int32 = 1
        // Best effort: a failure only costs latency.
        _ = sysSetsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return .processed((fd, peerAddress(storage)))
    }

    private static func peerAddress(_ storage: sockaddr_storage) -> String {
        var storage = storage
        let family = Int32(storage.ss_family)
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let written: UnsafePointer<CChar>? = withUnsafePointer(to: &storage) { pointer in
            switch family {
            case AF_INET:
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                    var inAddress = address.pointee.sin_addr
                    return inet_ntop(AF_INET, &inAddress, &text, socklen_t(text.count))
                }
            case AF_INET6:
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                    var in6Address = address.pointee.sin6_addr
                    return inet_ntop(AF_INET6, &in6Address, &text, socklen_t(text.count))
                }
            default:
                nil
            }
        }
        guard written != nil else { return "" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Errors of `accept` that concern one aborted connection only (accept(2), "Error handling").
    static func isTransientAcceptError(_ error: IOError) -> Bool {
        [ECONNABORTED, EPROTO, EPERM, ENETDOWN, ENOPROTOOPT, EHOSTDOWN, ENONET, EHOSTUNREACH, EOPNOTSUPP, ENETUNREACH]
            .contains(error.errnoCode)
    }

    static func read(_ fd: Int32, into buffer: UnsafeMutableBufferPointer<UInt8>) throws(IOError) -> IOResult<Int> {
        try syscall(nonBlocking: true, where: "read") { sysRead(fd, buffer.baseAddress, buffer.count) }
    }

    /// `send` with `MSG_NOSIGNAL`: a closed peer gives `EPIPE`, never `SIGPIPE`.
    static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall(nonBlocking: true, where: "send") {
            sysSend(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
        }
    }

    /// Sets `SO_SNDBUF` (the kernel doubles it); failures are ignored, the default buffer still works.
    static func setSendBufferSize(_ fd: Int32, bytes: Int) {
        var value = Int32(clamping: bytes)
        _ = sysSetsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Stops sending (FIN) while still reading: the first half of a lingering close.
    static func shutdownWrite(_ fd: Int32) {
        _ = sysShutdown(fd, Int32(SHUT_WR))
    }

    /// Ends the connection both ways (the peer sees EOF) without releasing the descriptor number.
    static func shutdownReadWrite(_ fd: Int32) {
        _ = sysShutdown(fd, Int32(SHUT_RDWR))
    }

    /// Closes a descriptor. Not retried on `EINTR`: on Linux the descriptor is released anyway.
    static func close(_ fd: Int32) {
        let result = sysClose(fd)
        if result != 0 && errno == EBADF { preconditionFailure("close of a closed descriptor \(fd)") }
    }

    // MARK: epoll and eventfd

    static func epollCreate() throws(IOError) -> Int32 {
        guard
            case .processed(let fd) = try syscall(
                nonBlocking: false, where: "epoll_create1",
                {
                    sysEpollCreate1(Int32(EPOLL_CLOEXEC))
                })
        else { preconditionFailure() }
        return fd
    }

    /// Registers `fd` with `events`, tagging it with `fd` itself.
    static func epollAdd(_ epoll: Int32, _ fd: Int32, events: UInt32) throws(IOError) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = UInt64(UInt32(bitPattern: fd))
        _ = try syscall(nonBlocking: false, where: "epoll_ctl(ADD)") { sysEpollCtl(epoll, EPOLL_CTL_ADD, fd, &event) }
    }

    static func epollRemove(_ epoll: Int32, _ fd: Int32) {
        var event = epoll_event()
        _ = sysEpollCtl(epoll, EPOLL_CTL_DEL, fd, &event)
    }

    /// Waits for events; an `EINTR` returns zero events.
    static func epollWait(
        _ epoll: Int32, _ events: UnsafeMutableBufferPointer<epoll_event>, timeoutMilliseconds: Int32
    ) throws(IOError) -> Int {
        let result = sysEpollWait(epoll, events.baseAddress, Int32(events.count), timeoutMilliseconds)
        if result >= 0 { return Int(result) }
        if errno == EINTR { return 0 }
        throw IOError(errnoCode: errno, reason: "epoll_wait")
    }

    static func eventfdCreate() throws(IOError) -> Int32 {
        guard
            case .processed(let fd) = try syscall(
                nonBlocking: false, where: "eventfd",
                {
                    sysEventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
                })
        else { preconditionFailure() }
        return fd
    }

    /// Adds 1 to the eventfd counter, waking the loop. A full counter (`EAGAIN`) is already a wake-up.
    static func eventfdSignal(_ fd: Int32) {
        var one: UInt64 = 1
        _ = try? syscall(nonBlocking: true, where: "eventfd write") { sysWrite(fd, &one, 8) }
    }

    /// Resets the eventfd counter.
    static func eventfdDrain(_ fd: Int32) {
        var value: UInt64 = 0
        _ = try? syscall(nonBlocking: true, where: "eventfd read") { sysRead(fd, &value, 8) }
    }

    static let epollIn = EPOLLIN.rawValue
    static let epollOut = EPOLLOUT.rawValue
    static let epollErr = EPOLLERR.rawValue
    static let epollHup = EPOLLHUP.rawValue
    static let epollRdHup = EPOLLRDHUP.rawValue
    static let epollEdgeTriggered = EPOLLET.rawValue
}
