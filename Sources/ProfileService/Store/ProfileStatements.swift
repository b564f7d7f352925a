import PostgresClient

/// The statements of ``PostgresProfileStore``, written for the declared fields: each lists the
/// fields' columns by name, always quoted (a field may be named `user` or `order`, which
/// unquoted are a function and a keyword), and a write receives the fields it sets as one JSON
/// object, so one statement serves every combination of fields (docs/design.md §11.2).
struct ProfileStatements {
    let catalog: ProfileFieldCatalog
    let select: PostgresStatement
    let selectMany: PostgresStatement
    let update: PostgresStatement
    let updateMany: PostgresStatement
    let insert: PostgresStatement
    let delete: PostgresStatement
    let deletedVersion: PostgresStatement
    let walPosition: PostgresStatement
    let handles: PostgresStatement
    let export: PostgresStatement

    var all: [PostgresStatement] {
        [select, selectMany, update, updateMany, insert, delete, deletedVersion, walPosition, handles, export]
    }

    init(_ catalog: ProfileFieldCatalog) {
        self.catalog = catalog
        let names = catalog.declarations.map(\.name)
        let quoted = names.map(Self.quoted)
        let columns = Self.columns(names, of: "")
        select = PostgresStatement(
            name: "profile_select", sql: "SELECT \(columns) FROM user_profiles WHERE id = $1", isIdempotent: true)
        // Several rows at once; `$1` is a bigint array in text form (`{1,2,3}`).
        selectMany = PostgresStatement(
            name: "profile_select_many", sql: "SELECT \(columns) FROM user_profiles WHERE id = ANY($1::bigint[])",
            isIdempotent: true)
        // The update: only at the expected version when `$2` is not null (a patch without
        // `If-Match` has none); the display name when `$3` is not null; the fields `$4` names;
        // the username (a rename, whose rules migrations/0007 keeps) when `$5` is not null.
        update = PostgresStatement(
            name: "profile_update",
            sql: """
                UPDATE user_profiles SET display_name = coalesce($3, display_name), username = coalesce($5, username)\(Self.assignments(names, from: "$4::jsonb", of: "")),
                    version = version + 1, updated_at = now()
                WHERE id = $1 AND ($2::integer IS NULL OR version = $2) RETURNING \(columns)
                """,
            isIdempotent: false)
        // Several updates in one statement, so one transaction; `$1` to `$5` are arrays in text
        // form of the ids, expected versions, names, fields and usernames. A row another transaction holds
        // locked (an operator's open `UPDATE`, another statement of this kind) is skipped, not
        // waited for: it is left out of the answer and its write goes alone, so one locked row
        // never holds a whole group, and two such statements never wait on each other.
        updateMany = PostgresStatement(
            name: "profile_update_many",
            sql: """
                WITH w AS (SELECT * FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::jsonb[], $5::text[]) AS w(id, version, display_name, fields, username)),
                locked AS (
                    SELECT p.id FROM user_profiles AS p JOIN w ON p.id = w.id
                    ORDER BY p.id FOR UPDATE OF p SKIP LOCKED)
                UPDATE user_profiles AS p SET display_name = coalesce(w.display_name, p.display_name), username = coalesce(w.username, p.username)\(Self.assignments(names, from: "w.fields", of: "p.")),
                    version = p.version + 1, updated_at = now()
                FROM w WHERE p.id = w.id AND (w.version IS NULL OR p.version = w.version) AND p.id IN (SELECT id FROM locked)
                RETURNING \(Self.columns(names, of: "p."))
                """,
            isIdempotent: false)
        insert = PostgresStatement(
            name: "profile_insert",
            sql: """
                INSERT INTO user_profiles (id, username, display_name, version, created_at, updated_at\(quoted.map { ", " + $0 }.joined()))
                VALUES ($1, $2, $3, 1, now(), now()\(names.map { ", $4::jsonb ->> '\($0)'" }.joined())) RETURNING \(columns)
                """,
            isIdempotent: false)
        delete = PostgresStatement(
            name: "profile_delete",
            sql: "DELETE FROM user_profiles WHERE id = $1 AND ($2::integer IS NULL OR version = $2) RETURNING version",
            isIdempotent: false)
        // A deleted row's last version, which the tombstone keeps (migrations/0003_version_rules.sql).
        deletedVersion = PostgresStatement(
            name: "profile_deleted_version", sql: "SELECT version FROM user_profile_tombstones WHERE id = $1",
            isIdempotent: true)
        // The flushed position, not the insert position: records that no commit has flushed yet
        // (pruning by reads, say) sit in a partial WAL page until the next commit, and a standby
        // cannot replay what it has not been sent (docs/design.md §8).
        walPosition = PostgresStatement(
            name: "wal_flush_position", sql: "SELECT pg_current_wal_flush_lsn()::text AS position", isIdempotent: true)
        // Who holds each handle of `$1` (a text array of handles), and for whom each is reserved:
        // a row per held handle (`version` set) and per live reservation (`reserved_until` set,
        // in milliseconds since 1970). Both use an index: `profile_handle(username)`, the
        // reservations' key (migrations/0007_handles.sql).
        handles = PostgresStatement(
            name: "profile_handles",
            sql: """
                SELECT q.handle, p.id, p.version, NULL::bigint AS reserved_until
                FROM unnest($1::text[]) AS q(handle) JOIN user_profiles AS p ON profile_handle(p.username) = q.handle
                UNION ALL
                SELECT r.handle, r.profile_id, NULL, (extract(epoch FROM r.reserved_until) * 1000)::bigint
                FROM username_reservations AS r WHERE r.handle = ANY($1::text[]) AND r.reserved_until > now()
                """,
            isIdempotent: true)
        // A profile's row with its creation time, and the handles still reserved for it as a JSON
        // array (`[]` for none): everything an export holds, in one statement.
        export = PostgresStatement(
            name: "profile_export",
            sql: """
                SELECT \(columns), \(Self.timestamp("created_at")) AS created_at,
                    (SELECT coalesce(json_agg(json_build_object(
                        'username', r.username, 'released_at', \(Self.timestamp("r.released_at")),
                        'reserved_until', \(Self.timestamp("r.reserved_until"))) ORDER BY r.released_at), '[]')::text
                     FROM username_reservations AS r WHERE r.profile_id = $1 AND r.reserved_until > now()) AS reservations
                FROM user_profiles WHERE id = $1
                """,
            isIdempotent: true)
    }

    /// `column` as RFC 3339 in UTC, to the microsecond.
    private static func timestamp(_ column: String) -> String {
        "to_char(\(column) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    }

    /// `name` as a quoted identifier. A declared name is `[a-z][a-z0-9_]*` (``ProfileFieldCatalog``),
    /// so quoting names the same column as writing it bare, without its ever being read as a
    /// keyword or a function (`SELECT user` is the role).
    static func quoted(_ name: String) -> String { "\"" + name + "\"" }

    /// A profile's columns, `updated_at` as RFC 3339 in UTC.
    private static func columns(_ fields: [String], of table: String) -> String {
        "\(table)id, \(table)username, \(table)display_name\(fields.map { ", \(table)\(quoted($0))" }.joined()), \(table)version, "
            + "\(timestamp("\(table)updated_at")) AS updated_at"
    }

    /// `, bio = CASE WHEN changes ? 'bio' THEN changes ->> 'bio' ELSE bio END` for each field: a
    /// field the object names is set (`null` unsets it), every other one stays.
    private static func assignments(_ fields: [String], from changes: String, of table: String) -> String {
        fields.map { ", \(quoted($0)) = CASE WHEN \(changes) ? '\($0)' THEN \(changes) ->> '\($0)' ELSE \(table)\(quoted($0)) END" }
            .joined()
    }

    func decode(_ row: PostgresRow) throws -> Profile {
        var fields: [ProfileFields.Entry] = []
        fields.reserveCapacity(catalog.declarations.count)
        for declaration in catalog.declarations {
            fields.append(.init(declaration, value: try row.decodeIfPresent(declaration.name, as: String.self)))
        }
        return Profile(
            id: try row.decode("id"),
            username: try row.decode("username"),
            displayName: try row.decode("display_name"),
            fields: ProfileFields(fields),
            version: try row.decode("version"),
            updatedAt: try row.decode("updated_at"))
    }
}
