import ArgumentParser
import Foundation
import Synchronization

/// Defaults for options from `PROFILE_*` environment variables.
///
/// ArgumentParser has no environment binding, so each option's default is read here; `--help`
/// then shows the value in force. A malformed value is remembered and reported by
/// ``validate()`` as a usage error, rather than silently replaced by the built-in default.
enum EnvironmentDefaults {
    private static let problems = Mutex<[String]>([])

    static func string(_ name: String, _ fallback: String) -> String {
        value(name) ?? fallback
    }

    static func optionalString(_ name: String) -> String? {
        value(name)
    }

    static func int(_ name: String, _ fallback: Int) -> Int {
        guard let text = value(name) else { return fallback }
        guard let number = Int(text) else {
            problems.withLock { $0.append("\(name)=\(text) is not an integer") }
            return fallback
        }
        return number
    }

    /// The integer `name` holds, or `nil` when unset (the option then has a computed default).
    static func optionalInt(_ name: String) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text) else {
            problems.withLock { $0.append("\(name)=\(text) is not an integer") }
            return nil
        }
        return number
    }

    static func double(_ name: String, _ fallback: Double) -> Double {
        guard let text = value(name) else { return fallback }
        guard let number = Double(text), number.isFinite else {
            problems.withLock { $0.append("\(name)=\(text) is not a number") }
            return fallback
        }
        return number
    }

    /// `1`, `true`, `yes` or `on` (any case) is true; `0`, `false`, `no` or `off` is false.
    static func bool(_ name: String, _ fallback: Bool = false) -> Bool {
        guard let text = value(name) else { return fallback }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            problems.withLock { $0.append("\(name)=\(text) is not true or false") }
            return fallback
        }
    }

    /// Throws the first malformed environment value as a usage error.
    static func validate() throws {
        if let problem = problems.withLock({ $0.first }) { throw ValidationError(problem) }
    }

    private static func value(_ name: String) -> String? {
        guard let text = ProcessInfo.processInfo.environment[name], !text.isEmpty else { return nil }
        return text
    }
}
