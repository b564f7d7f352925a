public import Foundation
import Synchronization

/// A process whose standard output is a pipe read as it fills, as a shell pipeline reads it
/// (`profilectl watch 1 | jq`): the lines written so far, at any moment — so a test sees whether
/// output reaches a pipe at once or only when a buffer fills or the process exits.
public final class PipedProcess {
    private final class Output: Sendable {
        let text = Mutex("")
    }

    private let process = Process()
    private let pipe = Pipe()
    private let output = Output()

    /// Starts `executable` with `arguments`; its standard error is discarded.
    public init(_ executable: URL, arguments: [String]) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        let output = output
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            output.text.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
    }

    deinit {
        if process.isRunning { process.terminate() }
        pipe.fileHandleForReading.readabilityHandler = nil
    }

    /// The complete and partial lines written so far.
    public var lines: [String] { output.text.withLock { $0 }.split(separator: "\n").map(String.init) }

    /// The lines so far that are JSON objects.
    public var jsonLines: [[String: Any]] {
        lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    public var isRunning: Bool { process.isRunning }

    /// Waits for the process to exit and returns its status.
    public func waitUntilExit() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }
}
