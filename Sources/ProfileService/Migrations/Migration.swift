import Foundation

/// One SQL file of `migrations/`, applied once, in name order.
public struct Migration: Sendable, Equatable {
    /// The file name, e.g. `0001_create_user_profiles.sql`; the key in `schema_migrations`.
    public var name: String
    public var sql: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }

    /// Every `*.sql` file of a folder, sorted by name.
    public static func load(from directory: String) throws -> [Migration] {
        let url = URL(fileURLWithPath: directory, isDirectory: true)
        let names = try FileManager.default.contentsOfDirectory(atPath: url.path)
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        return try names.map { name in
            Migration(name: name, sql: try String(contentsOf: url.appendingPathComponent(name), encoding: .utf8))
        }
    }
}
