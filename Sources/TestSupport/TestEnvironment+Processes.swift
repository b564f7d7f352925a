public import Foundation
import Glibc

extension TestEnvironment {
    /// scripts/deps.sh's state folder (`PROFILE_STATE_DIR`, default `.state`).
    public static var stateDirectory: String {
        variable("PROFILE_STATE_DIR") ?? repositoryRoot.appendingPathComponent(".state").path
    }

    /// The process id of the memcached node on `port`, from the pid file deps.sh keeps, for
    /// tests that hang a node (SIGSTOP) rather than stop it.
    ///
    /// Behind scripts/delay.sh, `port` is the proxy's: the node's own port is then the one at the
    /// same position in deps.sh's `PROFILE_MC_PORTS`.
    public static func memcachedPID(port: Int) throws -> pid_t {
        let port = nodePort(serving: port)
        let path = "\(stateDirectory)/memcached/\(port).pid"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw MissingServer(description: "no memcached pid file at \(path); run scripts/deps.sh start") }
        return pid
    }

    /// deps.sh's port of the memcached node that `PROFILE_MEMCACHED` reaches at `port`.
    private static func nodePort(serving port: Int) -> Int {
        guard let ports = variable("PROFILE_MC_PORTS")?.split(separator: ",").compactMap({ Int($0) }),
            let index = memcachedServers.firstIndex(where: { $0.port == port }), index < ports.count
        else { return port }
        return ports[index]
    }

    /// The PostgreSQL cluster of scripts/deps.sh: its postmaster (from `postmaster.pid`) and every
    /// process it started, for tests that freeze the whole server (SIGSTOP) rather than stop it.
    public static func postgresPIDs() throws -> [pid_t] {
        let path = "\(stateDirectory)/postgres/data/postmaster.pid"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let postmaster = text.split(separator: "\n").first.flatMap({ pid_t($0.trimmingCharacters(in: .whitespaces)) })
        else { throw MissingServer(description: "no postmaster.pid at \(path); run scripts/deps.sh start") }
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 2,
                pid_t(fields[1]) == postmaster
            else { continue }
            pids.append(pid)
        }
        return pids
    }

    /// Stops process `pid` with SIGSTOP and returns once it is stopped: `kill` only queues the
    /// signal, and a node that is still running for a moment answers the first request sent to
    /// it (seen on a loaded machine). Gives up after 2 s and says so.
    public static func freeze(_ pid: pid_t) throws {
        guard kill(pid, SIGSTOP) == 0 else {
            throw MissingServer(description: "cannot SIGSTOP process \(pid) (errno \(errno))")
        }
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            // /proc/PID/stat: "pid (comm) S …" — state T is stopped by a signal.
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let state = stat.split(separator: ")").last?.split(separator: " ").first,
                state == "T"
            {
                return
            }
            usleep(1000)
        }
        throw MissingServer(description: "process \(pid) did not stop within 2 s of SIGSTOP")
    }
}
