public import Foundation
import Glibc

extension TestEnvironment {
    /// scripts/deps.sh's state folder (`PROFILE_STATE_DIR`, default `.state`).
    public static var stateDirectory: String {
        variable("PROFILE_STATE_DIR") ?? repositoryRoot.appendingPathComponent(".state").path
    }

    /// The process id of the memcached node on `port`, from the pid file deps.sh keeps, for
    /// tests that hang a node (SIGSTOP) rather than stop it.
    public static func memcachedPID(port: Int) throws -> pid_t {
        let path = "\(stateDirectory)/memcached/\(port).pid"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw MissingServer(description: "no memcached pid file at \(path); run scripts/deps.sh start") }
        return pid
    }
}
