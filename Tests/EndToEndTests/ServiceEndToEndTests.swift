import Foundation
import Logging
import MemcachedClient
import PostgresClient
import Testing
import TestSupport

/// The built binary against the real PostgreSQL and memcached of scripts/deps.sh.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ServiceEndToEndTests {
    let migrations = TestEnvironment.repositoryRoot.appendingPathComponent("migrations").path

    @Test func migrateTwiceChangesNothingTheSecondTime() throws {
        let arguments = ["migrate", "--database-url", TestEnvironment.databaseURL, "--migrations-directory", migrations]
        let first = try ServiceProcess.run(arguments)
        #expect(first.status == 0, "\(first.standardError)")
        let second = try ServiceProcess.run(arguments)
        #expect(second.status == 0, "\(second.standardError)")
        #expect(second.standardError.contains("schema up to date"))
        #expect(!second.standardError.contains("applied migration"))
    }

    @Test func editedMigrationIsRefused() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for name in try FileManager.default.contentsOfDirectory(atPath: migrations) {
            try FileManager.default.copyItem(
                atPath: migrations + "/" + name, toPath: folder.appendingPathComponent(name).path)
        }
        let first = folder.appendingPathComponent("0001_create_user_profiles.sql")
        try (try String(contentsOf: first, encoding: .utf8) + "\n-- edited\n").write(to: first, atomically: true, encoding: .utf8)
        let result = try ServiceProcess.run(
            ["migrate", "--database-url", TestEnvironment.databaseURL, "--migrations-directory", folder.path])
        #expect(result.status == 1)
        #expect(result.standardError.contains("was edited after it was applied"))
    }

    @Test func createReadUpdateReadThroughTheRealService() throws {
        let service = try ServiceProcess()
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let url = "\(service.baseURL)/users/profile/\(id)"
        let json = ["Content-Type": "application/json"].merging(ServiceProcess.bearer(String(id))) { $1 }

        let created = try Curl.request(
            url, method: "PUT", headers: json.merging(["If-None-Match": "*"]) { $1 },
            body: #"{"username":"e2e\#(id % 1_000_000)","display_name":"First"}"#)
        #expect(created.status == 201, "\(created.body)")
        #expect(created.headers["location"] == "/users/profile/\(id)")
        #expect(created.headers["etag"] == "\"1\"")

        let read = try Curl.request(url)
        #expect(read.status == 200)
        #expect(read.headers["etag"] == "\"1\"")
        #expect(read.headers["cache-control"] == "no-cache")
        #expect(read.json?["display_name"] as? String == "First")
        #expect(read.json?["id"] as? Int64 == id)

        let updated = try Curl.request(
            url, method: "PUT", headers: json, body: #"{"display_name":"Second","version":1}"#)
        #expect(updated.status == 200, "\(updated.body)")
        #expect(updated.json?["version"] as? Int == 2)
        #expect(updated.json?["display_name"] as? String == "Second")
        #expect(updated.headers["etag"] == "\"2\"")

        let mine = try Curl.request(url + "?min_version=2")
        #expect(mine.json?["version"] as? Int == 2)
        let again = try Curl.request(url)
        #expect(again.json?["version"] as? Int == 2)
        #expect(again.headers["x-cache"] == "hit")

        // memcached holds the new version.
        let cache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
            logger: Logger(label: "e2e"))
        defer { cache.close() }
        guard case .hit(let item) = cache.get(ProfileCacheEntries.key(for: id)) else {
            Issue.record("memcached holds no entry for \(id)")
            return
        }
        #expect(ProfileCacheEntries.version(of: item.value) == 2)
        #expect(String(decoding: ProfileCacheEntries.json(of: item.value) ?? [], as: UTF8.self).contains(#""display_name":"Second""#))

        let notModified = try Curl.request(url, headers: ["If-None-Match": "\"2\""])
        #expect(notModified.status == 304)

        let stale = try Curl.request(url, method: "PUT", headers: json, body: #"{"display_name":"Late","version":1}"#)
        #expect(stale.status == 409)
        #expect(stale.headers["content-type"] == "application/problem+json")
        #expect((stale.json?["current"] as? [String: Any])?["version"] as? Int == 2)

        #expect(service.terminate() == 0)
        #expect(service.log.contains("listening"))
    }

    @Test func badInputGetsA4xxAndChangesNothing() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let url = "\(service.baseURL)/users/profile/\(id)"
        let json = ["Content-Type": "application/json"].merging(ServiceProcess.bearer(String(id))) { $1 }
        _ = try Curl.request(
            url, method: "PUT", headers: json.merging(["If-None-Match": "*"]) { $1 },
            body: #"{"username":"bad\#(id % 1_000_000)","display_name":"Keep"}"#)

        let cases: [(body: String, status: Int)] = [
            ("{not json", 400), (#"{"display_name":7,"version":1}"#, 400), (#"{"version":1}"#, 422),
            (#"{"display_name":"","version":1}"#, 422), (#"{"display_name":"x\u0007","version":1}"#, 422),
            (#"{"display_name":"x","version":-4}"#, 422), (#"{"display_name":"x"}"#, 428),
            (#"{"username":"other","display_name":"x","version":1}"#, 422), (#"{"display_name":null,"version":1}"#, 400),
        ]
        for (body, status) in cases {
            let response = try Curl.request(url, method: "PUT", headers: json, body: body)
            #expect(response.status == status, "\(body) → \(response.status) \(response.body)")
            #expect(response.headers["content-type"] == "application/problem+json")
        }
        #expect(try Curl.request("\(service.baseURL)/users/profile/abc").status == 400)
        #expect(try Curl.request("\(service.baseURL)/users/profile/0").status == 400)
        #expect(try Curl.request("\(service.baseURL)/users/profile/\(id + 1)").status == 404)
        #expect(try Curl.request("\(service.baseURL)/nope").status == 404)
        let post = try Curl.request(url, method: "POST")
        #expect(post.status == 405)
        #expect(post.headers["allow"] == "GET, HEAD, PUT, PATCH, DELETE")
        #expect(
            try Curl.request(
                url, method: "PUT", headers: ["Content-Type": "text/plain"].merging(ServiceProcess.bearer(String(id))) { $1 },
                body: "x"
            ).status == 415)

        let after = try Curl.request(url)
        #expect(after.json?["version"] as? Int == 1)
        #expect(after.json?["display_name"] as? String == "Keep")
    }

    @Test func invalidConfigurationExitsWithStatus2BeforeBinding() throws {
        for (arguments, environment) in [
            (["serve", "--port", "70000"], [String: String]()),
            (["serve", "--memcached", "127.0.0.1"], [:]),
            (["serve", "--workers", "0"], [:]),
            (["serve", "--memcached-retry-s", "0"], [:]),
            (["serve"], ["PROFILE_MEMCACHED_RETRY_S": "soon"]),
            (["serve", "--coalesced-wait-ms", "0"], [:]),
            (["serve"], ["PROFILE_PORT": "eighty"]),
            (["serve", "--log-level", "loud"], [:]),
            (["serve", "--no-such-flag"], [:]),
            (["serve"], [:]),
            (["serve", "--jwt-secret-file", "/nonexistent/secret"], [:]),
            (["serve", "--jwt-public-key-file", ServiceProcess.jwtSecretFile], [:]),
            (["serve", "--jwt-public-key-file", ServiceProcess.jwtSecretFile, "--jwt-algorithm", "RS256"], [:]),
            (["serve", "--jwt-secret-file", ServiceProcess.jwtSecretFile, "--jwt-algorithm", "none"], [:]),
            (["serve", "--auth", "none", "--jwt-secret-file", ServiceProcess.jwtSecretFile], [:]),
            (["serve"], ["PROFILE_AUTH": "off"]),
            (["serve", "--replica-database-url", "not a url"], [:]),
            (["serve"], ["PROFILE_REPLICA_DATABASE_URLS": "postgres://127.0.0.1:1/profiles,host"]),
            (["serve", "--replica-catch-up-ms", "-1"], [:]),
            (["serve", "--replica-max-lag-s", "0"], [:]),
            (["serve", "--replica-check-interval-ms", "5"], [:]),
        ] {
            let result = try ServiceProcess.run(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments) \(environment): \(result.standardError)")
            #expect(result.standardError.contains("error"), "\(result.standardError)")
        }
    }

    @Test func helpDocumentsEveryFlagWithItsVariable() throws {
        let help = try ServiceProcess.run(["serve", "--help"]).standardOutput
        for flag in ["--host", "--port", "--database-url", "--memcached", "--workers", "--cache-ttl-s", "--replica-database-url"] {
            #expect(help.contains(flag), "missing \(flag)")
        }
        for variable in ["PROFILE_HOST", "PROFILE_PORT", "PROFILE_DATABASE_URL", "PROFILE_MEMCACHED", "PROFILE_REPLICA_DATABASE_URLS"] {
            #expect(help.contains(variable), "missing \(variable)")
        }
        #expect(help.contains("(default: 8080)"))
    }
}
