import Foundation
import Testing

/// The client builds for the Apple platforms docs/client.md promises, though this machine builds for
/// Linux only: Package.swift declares those minimums, the client imports only what every
/// platform has, and its sources use no API of ``newerAPIs`` above the minimums.
@Suite struct PlatformMinimumsTests {
    /// APIs of the standard library and the SDKs that are newer than some minimum an app may
    /// declare, with the iOS release that brought each (macOS, tvOS, watchOS and visionOS got them
    /// in the same year's release). Add to it when the client reaches for something new.
    static let newerAPIs: [(pattern: String, iOS: Int)] = [
        ("Mutex<", 18), ("Atomic<", 18), ("Synchronization", 18), ("Int128", 18), ("UInt128", 18),
        ("RangeSet", 18), ("String(validating:", 18), ("withTaskExecutorPreference", 18),
        ("TaskExecutor", 18), ("Observations(", 26), ("InlineArray", 26), ("Span<", 26), ("RawSpan", 26),
        ("UTF8Span", 26), ("Task.immediate", 26), ("Task(name:", 26), ("@Observable", 17),
        ("import Observation", 17), ("withObservationTracking", 17), ("withDiscardingTaskGroup", 17),
        ("OSAllocatedUnfairLock", 16), ("Duration", 16), ("ContinuousClock", 16), ("Task.sleep(for:", 16),
        ("URL(filePath:", 16), ("Regex", 16),
    ]
    /// The modules the client may import: Foundation (FoundationNetworking on Linux) and
    /// Observation, which every platform's SDK and the Linux toolchain ship.
    static let allowedImports: Set<String> = ["Foundation", "FoundationNetworking", "Observation"]
    static let platforms = ["iOS", "macOS", "tvOS", "watchOS", "visionOS"]

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The table of minimums in docs/client.md (Platforms): `| iOS | 16 | why |`.
    static func readmeMinimums() throws -> [String: Int] {
        var minimums: [String: Int] = [:]
        for line in try read("docs/client.md").split(separator: "\n") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2, platforms.contains(cells[0]), let major = Int(cells[1]) else { continue }
            minimums[cells[0]] = major
        }
        return minimums
    }

    static func clientSources() throws -> [(name: String, text: String)] {
        let folder = root.appendingPathComponent("Sources/ProfileClient")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
            .sorted().map { ($0, try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8)) }
    }

    @Test func packageDeclaresTheREADMEsMinimumForEveryApplePlatform() throws {
        let minimums = try Self.readmeMinimums()
        #expect(Set(minimums.keys) == Set(Self.platforms), "the README names a minimum for each platform")
        let package = try Self.read("Package.swift")
        for (platform, major) in minimums {
            #expect(package.contains(".\(platform)(.v\(major))"), "Package.swift declares \(platform) \(major)")
        }
    }

    @Test func clientImportsOnlyWhatEveryPlatformHas() throws {
        for (name, text) in try Self.clientSources() {
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ")
                guard let index = words.firstIndex(of: "import"), index <= 1, index + 1 < words.count else { continue }
                #expect(Self.allowedImports.contains(String(words[index + 1])), "\(name): \(line)")
            }
        }
    }

    /// A use of a newer API is allowed in a file whose declarations are marked `@available` for it.
    @Test func clientUsesNoAPINewerThanTheREADMEsMinimums() throws {
        let iOS = try #require(try Self.readmeMinimums()["iOS"])
        for (name, text) in try Self.clientSources() {
            let marked = text.ranges(of: "@available(iOS ").compactMap { range in
                Int(text[range.upperBound...].prefix { $0.isNumber })
            }.max() ?? 0
            let code = text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
                .joined(separator: "\n")
            for (pattern, introduced) in Self.newerAPIs where introduced > max(iOS, marked) {
                #expect(!code.contains(pattern), "\(name) uses \(pattern) (iOS \(introduced)); the minimum is iOS \(iOS)")
            }
        }
    }
}
