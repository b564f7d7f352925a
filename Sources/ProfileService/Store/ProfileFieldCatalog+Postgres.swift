public import PostgresClient

extension ProfileFieldCatalog {
    /// What reading the declarations found.
    public enum Loaded: Sendable, Equatable {
        case declared(ProfileFieldCatalog)
        /// The database has no `profile_fields` table yet (a release ahead of its migrations,
        /// during an upgrade): a profile is its display name alone until `migrate` runs and the
        /// instance restarts.
        case notMigrated
    }

    /// Reads `profile_fields` (migrations/0005_profile_fields.sql, 0008_field_visibility.sql), in declaration order, and checks
    /// that `user_profiles` has a text column for every field.
    ///
    /// - Throws: ``ProfileFieldCatalogError`` for a declaration the service cannot serve, or the
    ///   connection's error.
    public static func load(from connection: PostgresConnection) throws -> Loaded {
        let rows: [PostgresRow]
        do {
            rows = try connection.simpleQuery(
                """
                SELECT f.name, f.kind, f.max_length::text AS max_length,
                    coalesce(to_jsonb(f) ->> 'read_by', 'everyone') AS read_by,
                    coalesce(to_jsonb(f) ->> 'written_by', 'owner') AS written_by,
                    (c.data_type IS NOT DISTINCT FROM 'text')::text AS has_column
                FROM profile_fields AS f
                LEFT JOIN information_schema.columns AS c
                    ON c.table_schema = current_schema() AND c.table_name = 'user_profiles' AND c.column_name = f.name
                ORDER BY f.position, f.name
                """
            ).rows
        } catch let error as PostgresError where error.sqlState == .undefinedTable {
            return .notMigrated
        }
        var declarations: [ProfileFieldDeclaration] = []
        for row in rows {
            let name: String = try row.decode("name")
            let kindName: String = try row.decode("kind")
            guard let kind = ProfileFieldDeclaration.Kind(rawValue: kindName) else {
                throw ProfileFieldCatalogError.unknownKind(field: name, kind: kindName)
            }
            guard try row.decode("has_column", as: String.self) == "true" else { throw ProfileFieldCatalogError.missingColumn(name) }
            let length = Int(try row.decode("max_length", as: String.self)) ?? 0
            // Read through to_jsonb: a database before migrations/0008 has neither column, and
            // every field is then public and written by its owner.
            let readers: String = try row.decode("read_by")
            guard let readBy = ProfileFieldDeclaration.Readers(rawValue: readers) else {
                throw ProfileFieldCatalogError.unknownVisibility(field: name, column: "read_by", value: readers)
            }
            let writers: String = try row.decode("written_by")
            guard let writtenBy = ProfileFieldDeclaration.Writers(rawValue: writers) else {
                throw ProfileFieldCatalogError.unknownVisibility(field: name, column: "written_by", value: writers)
            }
            declarations.append(
                ProfileFieldDeclaration(name: name, kind: kind, maximumLength: length, readBy: readBy, writtenBy: writtenBy))
        }
        return .declared(try ProfileFieldCatalog(declarations))
    }
}
