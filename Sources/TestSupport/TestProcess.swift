public import Foundation

/// Runs a program to completion, for tests that drive real clients (curl, python3) or the
/// built binary's subcommands.
public enum TestProcess {
    public struct Finished: Sendable {
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
    }

    /// Output goes through files, not pipes, so a chatty program can never block on a full pipe.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:]
    ) throws -> Finished {
        let directory = FileManager.default.temporaryDirectory
        let outputURL = directory.appendingPathComponent("test-process-\(UUID()).out")
        let errorURL = directory.appendingPathComponent("test-process-\(UUID()).err")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: outputURL)
            try? FileManager.default.removeItem(at: errorURL)
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.run()
        process.waitUntilExit()
        return Finished(
            status: process.terminationStatus,
            standardOutput: (try? String(contentsOf: outputURL, encoding: .utf8)) ?? "",
            standardError: (try? String(contentsOf: errorURL, encoding: .utf8)) ?? "")
    }
}
