import Foundation
import Testing
import TestSupport

/// Fields only their owner reads, through the built binary on PostgreSQL and memcached: declared
/// by the one migration an operator writes, kept out of every answer to anyone else — also when
/// a psql UPDATE changes them behind the service — and exported as PostgreSQL holds them.
@Suite(.serialized, .requires(.postgres, .memcached)) struct OwnerOnlyFieldsEndToEndTests {
    /// An owner-only email (the migration as an operator writes it), an owner-only birthday, and a
    /// public mark only administrators write: a field of every kind beside the standard ones.
    static let migration = """
        ALTER TABLE user_profiles ADD COLUMN email text;
        INSERT INTO profile_fields (name, kind, max_length, position, read_by) VALUES ('email', 'email', 254, 5, 'owner');
        ALTER TABLE user_profiles ADD COLUMN birthday text, ADD COLUMN verified text;
        INSERT INTO profile_fields (name, kind, max_length, position, read_by) VALUES ('birthday', 'date', 10, 6, 'owner');
        INSERT INTO profile_fields (name, kind, max_length, position, written_by) VALUES ('verified', 'text', 20, 7, 'admin');
        """

    private func request(
        _ service: ServiceProcess, _ path: String, as subject: Int64? = nil, scope: String? = nil, method: String = "GET",
        body: String? = nil
    ) throws -> Curl.Response {
        var headers: [String: String] = [:]
        if let subject { headers = ServiceProcess.bearer(String(subject), scope: scope) }
        if body != nil { headers["Content-Type"] = method == "PATCH" ? "application/merge-patch+json" : "application/json" }
        return try Curl.request("\(service.baseURL)\(path)", method: method, headers: headers, body: body)
    }

    @Test func anOwnerOnlyFieldIsTheOwnersAloneAndItsExportIsWhatPostgreSQLHolds() throws {
        try TestDatabase.Own.withFieldsService(adding: Self.migration) { service, database in
            let id = LiveUpdatesEndToEndTests.newID()
            let stranger = LiveUpdatesEndToEndTests.newID()
            try service.createProfile(id, usernamePrefix: "private")
            let path = "/users/profile/\(id)"
            let set = try request(service, path, as: id, method: "PATCH", body: #"{"email":"ada@example.com","birthday":"1990-04-21"}"#)
            #expect(set.status == 200 && set.json?["email"] as? String == "ada@example.com", "\(set.body)")
            let admin = try request(service, path, as: stranger, scope: "profiles:admin", method: "PATCH", body: #"{"verified":"staff"}"#)
            #expect(admin.status == 200, "\(admin.body)")
            let username = try #require(set.json?["username"] as? String)
            let renamed = try request(service, path, as: id, method: "PATCH", body: #"{"username":"\#(username)_2"}"#)
            #expect(renamed.status == 200, "a reservation for the export: \(renamed.body)")

            // Streams opened before a psql UPDATE of the email: the owner's hears it, the other's
            // hears the version without it.
            let ownerStream = try EventStreamTestClient(
                port: service.port, path: "\(path)/events", headers: ServiceProcess.bearer(String(id)))
            let otherStream = try EventStreamTestClient(
                port: service.port, path: "\(path)/events", headers: ServiceProcess.bearer(String(stranger)))
            #expect(try ownerStream.nextEvent(within: .seconds(5))?.data.contains("ada@example.com") == true)
            #expect(try otherStream.nextEvent(within: .seconds(5))?.data.contains("ada@example.com") == false)
            let sql = try TestDatabase.Own.psql(database.url, "UPDATE user_profiles SET email = 'ada@work.example' WHERE id = \(id)")
            #expect(sql.status == 0, "\(sql.standardError)")
            let ownerEvent = try ownerStream.nextEvent(within: .seconds(10))
            let otherEvent = try otherStream.nextEvent(within: .seconds(10))
            #expect(ownerEvent?.data.contains(#""email":"ada@work.example""#) == true, "\(String(describing: ownerEvent))")
            #expect(otherEvent?.data.contains(#""version":5"#) == true && otherEvent?.data.contains("email") == false)

            // Reads after the feed's repair (hits): the owner's carry it, no one else's.
            var hit: Curl.Response?
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                let read = try request(service, path, as: id)
                if read.json?["email"] as? String == "ada@work.example", read.headers["x-cache"] == "hit" {
                    hit = read
                    break
                }
                usleep(50_000)
            }
            #expect(hit?.headers["etag"] == "\"5\"" && hit?.headers["cache-control"] == "private, no-cache")
            for reader in [nil, stranger] as [Int64?] {
                let other = try request(service, path, as: reader)
                #expect(other.status == 200 && !other.body.contains("email") && !other.body.contains("1990-04-21"), "\(other.body)")
                #expect(other.headers["etag"] == "\"5-public\"" && other.headers["vary"] == "Authorization")
                #expect(other.json?["verified"] as? String == "staff", "public, though only administrators write it")
            }
            let refused = try request(service, path, as: id, method: "PATCH", body: #"{"verified":"self-made"}"#)
            #expect(refused.status == 403 && refused.json?["field"] as? String == "verified")

            // The export, member by member, against the row as PostgreSQL holds it.
            let export = try request(service, "\(path)/export", as: id)
            #expect(export.status == 200 && export.headers["cache-control"] == "private, no-store", "\(export.body)")
            let document = try #require(export.json)
            let exported = try #require(document["profile"] as? [String: Any])
            let row = try TestDatabase.Own.psql(database.url, """
                SELECT json_build_object('row', to_jsonb(p) - 'created_at' - 'updated_at',
                    'created_at', to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                    'updated_at', to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                    'reserved', (SELECT json_agg(username) FROM username_reservations WHERE profile_id = p.id))
                FROM user_profiles AS p WHERE id = \(id)
                """)
            let held = try #require(try JSONSerialization.jsonObject(with: Data(row.standardOutput.utf8)) as? [String: Any])
            let columns = try #require(held["row"] as? [String: Any])
            #expect(Set(exported.keys) == Set(columns.keys).union(["updated_at"]), "every column, no more")
            for (name, value) in columns {
                #expect("\(exported[name] ?? "absent")" == "\(value)", "\(name)")
            }
            #expect(exported["updated_at"] as? String == held["updated_at"] as? String)
            #expect(document["created_at"] as? String == held["created_at"] as? String)
            let reservations = try #require(document["username_reservations"] as? [[String: Any]])
            #expect(reservations.map { $0["username"] as? String } == (held["reserved"] as? [String]).map { $0.map(Optional.some) })
            #expect(reservations.first?["username"] as? String == username)

            #expect(try request(service, "\(path)/export", as: stranger).status == 403)
            #expect(try request(service, path, as: id, method: "DELETE").status == 204)
            #expect(try request(service, "\(path)/export", as: id).status == 404, "a deleted profile has no export")
        }
    }
}
