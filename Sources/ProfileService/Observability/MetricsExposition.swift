public import ServiceRuntime

/// The text `GET /metrics` answers (Prometheus text format 0.0.4): the families the metrics
/// backend renders, each given its `# HELP` from ``MetricFamily``, and the process and build
/// families, which no backend keeps; families sorted by name and series by their labels, so that
/// two scrapes of any two instances read the same way.
public enum MetricsExposition {
    /// What `profile_service_build_info` reports.
    public struct Build: Sendable {
        public var version: String
        public var revision: String

        public init(version: String, revision: String) {
            self.version = version
            self.revision = revision
        }
    }

    /// `rendered`, the backend's text, completed and put in order.
    public static func render(_ rendered: [UInt8], process: ProcessStatistics?, build: Build) -> [UInt8] {
        var text = String(decoding: rendered, as: UTF8.self)
        text += processFamilies(process)
        text += sample(.buildInfo, labels: [("version", build.version), ("revision", build.revision)], value: "1")
        var output = ""
        output.reserveCapacity(text.utf8.count + 8 * 1024)
        for family in families(in: text).sorted(by: { $0.name < $1.name }) {
            if let declared = MetricFamily.named(family.name) {
                output += "# HELP \(family.name) \(escapedHelp(declared.help))\n"
            }
            output += "# TYPE \(family.name) \(family.type)\n"
            for series in family.series.sorted() { output += series }
        }
        return Array(output.utf8)
    }

    /// One family of the text: its name, its type and its series, each series the lines of one
    /// label set (a histogram's buckets, sum and count together).
    struct Family {
        var name: String
        var type: String
        var series: [String] = []
    }

    /// The families of `text` in their order. `# HELP` lines are dropped (``render(_:process:build:)``
    /// writes the catalogue's); a sample line without a `# TYPE` before it is its own untyped family.
    static func families(in text: String) -> [Family] {
        var families: [Family] = []
        var openSeriesLabels: Substring?
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# TYPE ") {
                let words = line.split(separator: " ")
                guard words.count == 4 else { continue }
                families.append(Family(name: String(words[2]), type: String(words[3])))
                openSeriesLabels = nil
                continue
            }
            if line.hasPrefix("#") { continue }
            let (name, labels) = nameAndLabels(of: line)
            if families.last.map({ !name.hasPrefix($0.name) }) ?? true {
                families.append(Family(name: String(name), type: "untyped"))
                openSeriesLabels = nil
            }
            // A histogram's lines of one label set (less `le`) stay one series, in their order.
            let seriesLabels = Substring(labels.replacing(/,?le="[^"]*"/, with: ""))
            if families[families.count - 1].type == "histogram", seriesLabels == openSeriesLabels {
                families[families.count - 1].series[families[families.count - 1].series.count - 1] += line + "\n"
            } else {
                families[families.count - 1].series.append(line + "\n")
                openSeriesLabels = seriesLabels
            }
        }
        return families
    }

    /// A sample line's metric name and its label text (between the braces, or empty).
    private static func nameAndLabels(of line: Substring) -> (name: Substring, labels: Substring) {
        guard let end = line.firstIndex(where: { $0 == "{" || $0 == " " }) else { return (line, "") }
        guard line[end] == "{", let close = line.lastIndex(of: "}") else { return (line[..<end], "") }
        return (line[..<end], line[line.index(after: end)..<close])
    }

    /// The `process_*` families every Prometheus client exports; none where `/proc` is not there.
    static func processFamilies(_ process: ProcessStatistics?) -> String {
        guard let process else { return "" }
        return sample(.processCPUSeconds, value: "\(process.cpuSeconds)")
            + sample(.processResidentMemory, value: "\(process.residentMemoryBytes)")
            + sample(.processVirtualMemory, value: "\(process.virtualMemoryBytes)")
            + sample(.processOpenFDs, value: "\(process.openFileDescriptors)")
            + sample(.processMaxFDs, value: "\(process.maximumFileDescriptors)")
            + sample(.processStartTime, value: "\(process.startTimeSeconds)")
            + sample(.processThreads, value: "\(process.threads)")
    }

    /// A family of one series, in the text format.
    private static func sample(_ family: MetricFamily, labels: [(String, String)] = [], value: String) -> String {
        let labelText =
            labels.isEmpty ? "" : "{" + labels.map { "\($0)=\"\(escapedLabelValue($1))\"" }.joined(separator: ",") + "}"
        return "# TYPE \(family.name) \(family.kind.rawValue)\n\(family.name)\(labelText) \(value)\n"
    }

    private static func escapedHelp(_ help: String) -> String {
        help.replacing("\\", with: "\\\\").replacing("\n", with: "\\n")
    }

    private static func escapedLabelValue(_ value: String) -> String {
        escapedHelp(value).replacing("\"", with: "\\\"")
    }
}
