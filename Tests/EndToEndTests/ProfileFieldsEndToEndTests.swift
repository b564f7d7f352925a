import Foundation
import Synchronization
import Testing
import TestSupport

/// The declared profile fields through the built binary: two devices patching different fields,
/// and an operator adding a field with one migration.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ProfileFieldsEndToEndTests {
    private static let patchHeaders = ["Content-Type": "application/merge-patch+json"]

    private func patch(_ instance: ServiceProcess, _ id: Int64, _ body: String, ifMatch: Int? = nil) throws -> Curl.Response {
        var headers = ServiceProcess.bearer(String(id)).merging(Self.patchHeaders) { $1 }
        if let ifMatch { headers["If-Match"] = "\"\(ifMatch)\"" }
        return try Curl.request("\(instance.baseURL)/users/profile/\(id)", method: "PATCH", headers: headers, body: body)
    }

    /// Two devices of one user, each editing its own field through its own instance, at once and
    /// without versions: every patch lands (no 409), each device reads its own write from the
    /// version it was answered, and the profile ends with both devices' last values.
    @Test func twoDevicesPatchingDifferentFieldsBothLandAndEachReadsItsOwnWrite() throws {
        let instances = [try ServiceProcess(), try ServiceProcess()]
        defer { for instance in instances { _ = instance.terminate() } }
        let id = LiveUpdatesEndToEndTests.newID()
        try instances[0].createProfile(id, usernamePrefix: "fields")
        let rounds = 25
        let fields = ["bio", "location"]
        let failures = Mutex<[String]>([])
        let devices = (0..<2).map { device in
            TestThread {
                let field = fields[device]
                for round in 0..<rounds {
                    let value = "\(field) from device \(device), edit \(round)"
                    guard let patched = try? patch(instances[device], id, #"{"\#(field)":"\#(value)"}"#) else {
                        failures.withLock { $0.append("device \(device) round \(round): no answer") }
                        continue
                    }
                    guard patched.status == 200, let version = patched.json?["version"] as? Int else {
                        failures.withLock { $0.append("device \(device) round \(round): \(patched.status) \(patched.body)") }
                        continue
                    }
                    if patched.json?[field] as? String != value {
                        failures.withLock { $0.append("device \(device) round \(round): the answer lacks its own field") }
                    }
                    // Read-your-writes for this field, through either instance.
                    let read = try? Curl.request("\(instances[(device + round) % 2].baseURL)/users/profile/\(id)?min_version=\(version)")
                    let readVersion = read?.json?["version"] as? Int ?? 0
                    if readVersion < version || (readVersion == version && read?.json?[field] as? String != value) {
                        failures.withLock { $0.append("device \(device) round \(round): wrote v\(version), read v\(readVersion)") }
                    }
                }
            }
        }
        for device in devices { device.join() }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let final = try Curl.request("\(instances[1].baseURL)/users/profile/\(id)?min_version=\(1 + 2 * rounds)")
        #expect(final.json?["version"] as? Int == 1 + 2 * rounds, "every patch landed on a version of its own")
        #expect(final.json?["bio"] as? String == "bio from device 0, edit \(rounds - 1)")
        #expect(final.json?["location"] as? String == "location from device 1, edit \(rounds - 1)")
        #expect(final.json?["display_name"] as? String == "First", "neither device touched the name")
    }

    /// With `If-Match`, patches are optimistic as `PUT` is: of two made from the same version, one
    /// lands and the other is 409 with the current profile, whatever fields they name.
    @Test func patchesWithIfMatchConflictAsPutsDo() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = LiveUpdatesEndToEndTests.newID()
        try service.createProfile(id, usernamePrefix: "ifmatch")
        let first = try patch(service, id, #"{"bio":"first"}"#, ifMatch: 1)
        #expect(first.status == 200 && first.json?["version"] as? Int == 2)
        let second = try patch(service, id, #"{"location":"second"}"#, ifMatch: 1)
        #expect(second.status == 409, "\(second.body)")
        let current = second.json?["current"] as? [String: Any]
        #expect(current?["version"] as? Int == 2 && current?["bio"] as? String == "first")
        // A PUT that names only the name keeps the fields (a client that knows no fields).
        let put = try Curl.request(
            "\(service.baseURL)/users/profile/\(id)", method: "PUT", headers: ServiceProcess.writeHeaders(for: id),
            body: #"{"display_name":"Renamed","version":2}"#)
        #expect(put.status == 200 && put.json?["bio"] as? String == "first" && put.json?["display_name"] as? String == "Renamed")
    }

    /// An operator adds a field: one migration (the column and its declaration), then the
    /// instances start. It is served by GET, lists and streams, accepted by PUT and PATCH,
    /// validated, repaired in the cache after an `UPDATE` at a psql prompt, and described by
    /// `profile-service openapi`. Its own database (with a slot of its own) and memcached node: the
    /// field must not reach the other tests' profiles.
    @Test func aFieldAddedByAMigrationIsServedValidatedAndRepaired() throws {
        try TestDatabase.Own.withFieldsService(adding: """
                ALTER TABLE user_profiles ADD COLUMN pronouns TEXT;
                INSERT INTO profile_fields (name, kind, max_length, position) VALUES ('pronouns', 'text', 40, 5);
                """) { service, database in
            #expect(service.log(waitingUntil: { $0.contains("pronouns") }).contains(#"profile fields"#))
            let id = LiveUpdatesEndToEndTests.newID()
            let url = "\(service.baseURL)/users/profile/\(id)"
            let created = try Curl.request(
                url, method: "PUT", headers: ServiceProcess.writeHeaders(for: id).merging(["If-None-Match": "*"]) { $1 },
                body: #"{"username":"pro\#(id % 100_000_000)","display_name":"Sam","pronouns":"they/them","bio":"Hi"}"#)
            #expect(created.status == 201, "\(created.body)")
            #expect(created.json?["pronouns"] as? String == "they/them" && created.json?["bio"] as? String == "Hi")
            // Served by GET (a hit: written through), and by a list.
            let read = try Curl.request(url)
            #expect(read.json?["pronouns"] as? String == "they/them")
            let list = try Curl.request("\(service.baseURL)/users/profiles?ids=\(id)")
            let listed = (list.json?["profiles"] as? [[String: Any]])?.first
            #expect(listed?["pronouns"] as? String == "they/them", "\(list.body)")
            // Validated with its declaration's bound, and unset by null.
            let tooLong = try patch(service, id, #"{"pronouns":"\#(String(repeating: "x", count: 41))"}"#)
            #expect(tooLong.status == 422 && tooLong.json?["field"] as? String == "pronouns", "\(tooLong.body)")
            let patched = try patch(service, id, #"{"pronouns":"she/her"}"#)
            #expect(patched.status == 200 && patched.json?["pronouns"] as? String == "she/her" && patched.json?["version"] as? Int == 2)
            let unset = try Curl.request(
                url, method: "PUT", headers: ServiceProcess.writeHeaders(for: id), body: #"{"display_name":"Sam","pronouns":null,"version":2}"#)
            #expect(unset.status == 200 && unset.json?["pronouns"] is NSNull, "\(unset.body)")
            // An operator's UPDATE at a psql prompt: the change feed repairs the cached entry.
            let stream = try LiveUpdatesEndToEndTests.openStream(port: service.port, path: "/users/profile/\(id)/events")
            _ = try stream.nextEvent(within: .seconds(5))  // the current profile
            let sql = try TestProcess.run(
                URL(fileURLWithPath: "/usr/bin/psql"), [database.url, "-qtAc", "UPDATE user_profiles SET pronouns = 'xe/xem' WHERE id = \(id)"])
            #expect(sql.status == 0, "\(sql.standardError)")
            let event = try stream.nextEvent(within: .seconds(10))
            #expect(event?.data.contains(#""pronouns":"xe/xem""#) == true, "the stream carries the field: \(String(describing: event))")
            var repaired: [String: Any]?
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                let hit = try Curl.request(url)
                if hit.json?["pronouns"] as? String == "xe/xem" {
                    repaired = hit.json
                    #expect(hit.headers["x-cache"] == "hit", "repaired in the cache, not read past it")
                    break
                }
                usleep(50_000)
            }
            #expect(repaired?["version"] as? Int == 4, "the psql UPDATE is version 4 (the version rules)")
            // Described as the service validates it.
            let openapi = try ServiceProcess.run(["openapi", "--database-url", database.url, "--spec", TestEnvironment.repositoryRoot.appendingPathComponent("openapi.yaml").path])
            #expect(openapi.status == 0, "\(openapi.standardError)")
            #expect(openapi.standardOutput.contains("'pronouns': {type: [string, 'null'], maxLength: 40,"))
            #expect(openapi.standardOutput.components(separatedBy: "'pronouns': {").count - 1 == 4, "Profile, UpdateRequest, ProfilePatch, CreateRequest")
        }
    }

    /// Fields named as SQL keywords and functions (`user` is the role's name to PostgreSQL,
    /// `order` a reserved word): columns like any other — unset as `null`, set by PATCH, repaired
    /// from a psql UPDATE — and never the database role in an answer.
    @Test func fieldsNamedAfterSQLKeywordsAreFieldsLikeAnyOther() throws {
        try TestDatabase.Own.withFieldsService(adding: """
                ALTER TABLE user_profiles ADD COLUMN "user" TEXT, ADD COLUMN "order" TEXT;
                INSERT INTO profile_fields (name, kind, max_length, position) VALUES ('user', 'text', 40, 5), ('order', 'text', 40, 6);
                """) { service, database in
            let role = try TestProcess.run(URL(fileURLWithPath: "/usr/bin/psql"), [database.url, "-qtAc", "SELECT current_user"])
                .standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!role.isEmpty)
            let id = LiveUpdatesEndToEndTests.newID()
            let url = "\(service.baseURL)/users/profile/\(id)"
            let created = try Curl.request(
                url, method: "PUT", headers: ServiceProcess.writeHeaders(for: id).merging(["If-None-Match": "*"]) { $1 },
                body: #"{"username":"kw\#(id % 100_000_000)","display_name":"Keywords"}"#)
            #expect(created.status == 201, "\(created.body)")
            #expect(created.json?["user"] is NSNull && created.json?["order"] is NSNull, "\(created.body)")
            let read = try Curl.request(url)
            #expect(read.status == 200 && read.json?["user"] is NSNull && read.json?["order"] is NSNull, "\(read.body)")
            let patched = try patch(service, id, #"{"user":"ada","order":"first"}"#)
            #expect(patched.status == 200, "\(patched.body)")
            #expect(patched.json?["user"] as? String == "ada" && patched.json?["order"] as? String == "first" && patched.json?["version"] as? Int == 2)
            let put = try Curl.request(
                url, method: "PUT", headers: ServiceProcess.writeHeaders(for: id), body: #"{"display_name":"Keywords","user":null,"version":2}"#)
            #expect(put.status == 200 && put.json?["user"] is NSNull && put.json?["order"] as? String == "first", "\(put.body)")
            let list = try Curl.request("\(service.baseURL)/users/profiles?ids=\(id)")
            #expect((list.json?["profiles"] as? [[String: Any]])?.first?["order"] as? String == "first", "\(list.body)")
            // An operator's UPDATE of the column, quoted as psql needs it, reaches the cache.
            let sql = try TestProcess.run(
                URL(fileURLWithPath: "/usr/bin/psql"), [database.url, "-qtAc", #"UPDATE user_profiles SET "user" = 'grace' WHERE id = \#(id)"#])
            #expect(sql.status == 0, "\(sql.standardError)")
            var repaired = false
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline, !repaired {
                repaired = try Curl.request(url).json?["user"] as? String == "grace"
                if !repaired { usleep(50_000) }
            }
            #expect(repaired, "the change feed decodes the field by its name")
            for body in [created.body, read.body, patched.body, put.body, list.body] {
                #expect(!body.contains("\"\(role)\""), "the role's name in \(body)")
            }
            // Quoted keys: YAML reads a bare `on`, `null` or `true` as no string.
            let openapi = try ServiceProcess.run(["openapi", "--database-url", database.url, "--spec", TestEnvironment.repositoryRoot.appendingPathComponent("openapi.yaml").path])
            #expect(openapi.status == 0, "\(openapi.standardError)")
            #expect(openapi.standardOutput.contains("'user': {type: [string, 'null'], maxLength: 40,"))
            #expect(openapi.standardOutput.contains("'order': {type: [string, 'null'], maxLength: 40,"))
        }
    }
}

extension ProfileFieldsEndToEndTests {
    /// A rolling restart that adds a field: instance A started before the migration that declares
    /// `pronouns`, B after it, side by side on one database and one memcached node. Each serves
    /// its own shape only (A never answers `pronouns`, B always does, whoever wrote the cache
    /// entry last); A's writes, which know only the name, never erase B's field; a reader with a
    /// floor gets at least its version through either; no floorless reader of either goes back.
    @Test func oldAndNewInstancesSideBySideServeTheirOwnFieldsAndNoVersionGoesBack() throws {
        let database = try TestDatabase.Own(prefix: "profiles_fields")
        defer { database.drop() }
        try database.migrate()
        let node = try MemcachedNodes(count: 1)
        defer { node.stop() }
        let arguments = database.serviceArguments(memcached: node)
        let old = try ServiceProcess(arguments: arguments)
        defer { _ = old.terminate() }
        try database.migrate(adding: """
            ALTER TABLE user_profiles ADD COLUMN pronouns TEXT;
            INSERT INTO profile_fields (name, kind, max_length, position) VALUES ('pronouns', 'text', 40, 5);
            """)
        let new = try ServiceProcess(arguments: arguments)
        defer {
            _ = new.terminate()
            _ = old.terminate()
            database.dropSlots()
        }
        let id = LiveUpdatesEndToEndTests.newID()
        try old.createProfile(id, usernamePrefix: "roll")
        var version = 1
        var lastSeen = [0, 0]
        var problems: [String] = []
        for round in 0..<20 {
            // The old instance renames (a client that knows no fields); the new one sets the field.
            let renamed = try Curl.request(
                "\(old.baseURL)/users/profile/\(id)", method: "PUT", headers: ServiceProcess.writeHeaders(for: id),
                body: #"{"display_name":"Name \#(round)","version":\#(version)}"#)
            guard renamed.status == 200, renamed.json?["pronouns"] == nil else {
                problems.append("round \(round): old PUT \(renamed.status) \(renamed.body)")
                break
            }
            version += 1
            let patched = try patch(new, id, #"{"pronouns":"p\#(round)"}"#)
            guard patched.status == 200, patched.json?["display_name"] as? String == "Name \(round)" else {
                problems.append("round \(round): new PATCH \(patched.status) \(patched.body)")
                break
            }
            version += 1
            for (index, instance) in [old, new].enumerated() {
                let floored = try Curl.request("\(instance.baseURL)/users/profile/\(id)?min_version=\(version)")
                let plain = try Curl.request("\(instance.baseURL)/users/profile/\(id)")
                for read in [floored, plain] {
                    let hasField = read.json?.keys.contains("pronouns") ?? false
                    if hasField != (index == 1) { problems.append("round \(round): instance \(index) answered \(read.body)") }
                }
                if floored.json?["version"] as? Int ?? 0 < version { problems.append("round \(round): floor \(version) not met") }
                if index == 1, floored.json?["pronouns"] as? String != "p\(round)" { problems.append("round \(round): field lost") }
                let seen = plain.json?["version"] as? Int ?? 0
                if seen < lastSeen[index] { problems.append("round \(round): instance \(index) went back to v\(seen)") }
                lastSeen[index] = max(lastSeen[index], seen)
            }
        }
        #expect(problems.isEmpty, "\(problems)")
        #expect(version == 41)
    }
}

extension TestDatabase.Own {
    /// Runs `body` with an instance of a database of its own, migrated and then given `migration`
    /// (fields the other tests' profiles must not have), and a memcached node of its own.
    static func withFieldsService(adding migration: String, _ body: (ServiceProcess, TestDatabase.Own) throws -> Void) throws {
        let database = try TestDatabase.Own(prefix: "profiles_fields")
        defer { database.drop() }
        try database.migrate(adding: migration)
        let node = try MemcachedNodes(count: 1)
        defer { node.stop() }
        let service = try ServiceProcess(arguments: database.serviceArguments(memcached: node))
        defer {
            _ = service.terminate()
            database.dropSlots()
        }
        try body(service, database)
    }

    /// `serve`'s arguments for an instance of this database and `node` (the default cache cluster:
    /// its slot is this database's own).
    func serviceArguments(memcached node: MemcachedNodes) -> [String] {
        ServiceProcess.jwtArguments + ["--database-url", url, "--memcached", node.serverList]
    }
}
