import Glibc

/// What the kernel says of this process: the figures every Prometheus client exports as
/// `process_*` (CPU time, memory, file descriptors, start time, threads), read from `/proc`.
public struct ProcessStatistics: Sendable, Equatable {
    /// User plus system CPU time, in seconds.
    public var cpuSeconds: Double
    public var residentMemoryBytes: Int
    public var virtualMemoryBytes: Int
    public var openFileDescriptors: Int
    /// The soft limit of open file descriptors (`RLIMIT_NOFILE`).
    public var maximumFileDescriptors: Int
    /// When the process started, in seconds since the Unix epoch.
    public var startTimeSeconds: Double
    public var threads: Int

    /// The figures of the calling process now, or nil where `/proc` is not mounted.
    public static func current() -> ProcessStatistics? {
        guard let stat = readFile("/proc/self/stat"), let systemStat = readFile("/proc/stat") else { return nil }
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        return parse(
            stat: stat, systemStat: systemStat, clockTicksPerSecond: Int(sysconf(Int32(_SC_CLK_TCK))),
            pageSize: Int(sysconf(Int32(_SC_PAGESIZE))), openFileDescriptors: countOpenFileDescriptors(),
            maximumFileDescriptors: Int(clamping: limit.rlim_cur))
    }

    /// The figures in `/proc/self/stat` (`stat`) and `/proc/stat` (`systemStat`, for the boot time).
    /// Fields are counted after the command name's closing parenthesis, which may itself hold
    /// spaces and parentheses (proc(5)).
    static func parse(
        stat: String, systemStat: String, clockTicksPerSecond: Int, pageSize: Int, openFileDescriptors: Int,
        maximumFileDescriptors: Int
    ) -> ProcessStatistics? {
        guard let commandEnd = stat.lastIndex(of: ")") else { return nil }
        // After the command: field 3 (state) is at index 0, so field n is at index n - 3.
        let fields = stat[stat.index(after: commandEnd)...].split(separator: " ")
        func field(_ number: Int) -> Int? {
            number - 3 < fields.count ? Int(fields[number - 3]) : nil
        }
        guard let userTicks = field(14), let systemTicks = field(15), let threads = field(20),
            let startTicks = field(22), let virtualBytes = field(23), let residentPages = field(24),
            let bootTime = systemStat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") })
                .flatMap({ Int($0.dropFirst("btime ".count)) }),
            clockTicksPerSecond > 0
        else { return nil }
        let ticks = Double(clockTicksPerSecond)
        return ProcessStatistics(
            cpuSeconds: Double(userTicks + systemTicks) / ticks, residentMemoryBytes: residentPages * pageSize,
            virtualMemoryBytes: virtualBytes, openFileDescriptors: openFileDescriptors,
            maximumFileDescriptors: maximumFileDescriptors, startTimeSeconds: Double(bootTime) + Double(startTicks) / ticks,
            threads: threads)
    }

    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The entries of `/proc/self/fd`, less the one the listing itself holds open.
    private static func countOpenFileDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { count += 1 }
        }
        return count - 1
    }
}
