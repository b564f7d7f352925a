import ArgumentParser
import ServiceRuntime
import Logging

/// The one call to `LoggingSystem.bootstrap` in the program: one structured line per event, on
/// stderr through ``LogSink/standardError``.
func bootstrapLogging(level: Logger.Level, format: StructuredLogHandler.Format) {
    LoggingSystem.bootstrap { label in
        var handler = StructuredLogHandler(label: label, format: format)
        handler.logLevel = level
        return handler
    }
}

/// `--log-level` and `--log-format`, shared by every subcommand.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical. [PROFILE_LOG_LEVEL]")
    var logLevel: String = EnvironmentDefaults.string("PROFILE_LOG_LEVEL", "info")

    @Option(help: "Log line format: logfmt or json. [PROFILE_LOG_FORMAT]")
    var logFormat: String = EnvironmentDefaults.string("PROFILE_LOG_FORMAT", "logfmt")

    func validate() throws {
        _ = try level()
        _ = try format()
    }

    func bootstrap() throws {
        bootstrapLogging(level: try level(), format: try format())
    }

    private func level() throws -> Logger.Level {
        guard let level = Logger.Level(rawValue: logLevel.lowercased()) else {
            throw ValidationError(
                "--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got \(logLevel)"
            )
        }
        return level
    }

    func format() throws -> StructuredLogHandler.Format {
        guard let format = StructuredLogHandler.Format(rawValue: logFormat.lowercased()) else {
            throw ValidationError("--log-format must be logfmt or json, got \(logFormat)")
        }
        return format
    }
}
