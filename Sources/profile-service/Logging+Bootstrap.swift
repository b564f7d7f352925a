import ArgumentParser
import Logging

/// The one call to `LoggingSystem.bootstrap` in the program: one line per event, on stderr.
func bootstrapLogging(level: Logger.Level) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
}

func parseLogLevel(_ text: String) throws -> Logger.Level {
    guard let level = Logger.Level(rawValue: text.lowercased()) else {
        throw ValidationError(
            "--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got \(text)")
    }
    return level
}
