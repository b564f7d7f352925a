import CLinuxShims
import Glibc

/// How many CPUs the process may keep busy: the CPUs it may run on (its affinity, which `taskset`,
/// cpusets and Kubernetes' static CPU manager narrow), capped by its cgroup's CPU quota (a
/// container's `--cpus`, a pod's CPU limit), rounded up. Not the host's core count: a service
/// pinned to 4 cores of a 64-core host that sized itself by the host would run 64 event loops on 4.
public enum UsableProcessors {
    public static var count: Int {
        let affinity = Int(cls_affinity_cpu_count())
        let online = max(sysconf(Int32(_SC_NPROCESSORS_ONLN)), 1)
        let allowed = affinity > 0 ? affinity : online
        guard let quota = cgroupQuota() else { return allowed }
        return max(1, min(allowed, quota))
    }

    /// CPUs' worth of the cgroup's quota, rounded up; nil without one ("max", or no cgroup file).
    static func cgroupQuota() -> Int? {
        // cgroup v2: "200000 100000" (quota and period, µs) or "max 100000".
        if let line = firstLine(of: "/sys/fs/cgroup/cpu.max") {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let quota = Int(fields[0]), let period = Int(fields[1]) else { return nil }
            return cpus(quota: quota, period: period)
        }
        // cgroup v1: quota -1 means none.
        if let quota = firstLine(of: "/sys/fs/cgroup/cpu/cpu.cfs_quota_us").flatMap({ Int($0) }),
            let period = firstLine(of: "/sys/fs/cgroup/cpu/cpu.cfs_period_us").flatMap({ Int($0) })
        {
            return cpus(quota: quota, period: period)
        }
        return nil
    }

    static func cpus(quota: Int, period: Int) -> Int? {
        guard quota > 0, period > 0 else { return nil }
        return (quota + period - 1) / period
    }

    private static func firstLine(of path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 128)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let line = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return line.trimmingSuffix(while: { $0 == "\n" || $0 == " " })
    }
}

extension String {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> String {
        var result = self
        while let last = result.last, predicate(last) { result.removeLast() }
        return result
    }
}
