import Foundation
import Logging
import MemcachedClient
import Testing
import TestSupport

/// Bearer-token authorization through the built binary, curl, PostgreSQL and memcached.
@Suite(.serialized, .requires(.postgres, .memcached)) struct AuthEndToEndTests {
    /// The version of profile `id`'s memcached entry, `nil` without one.
    func cachedVersion(of id: Int64) throws -> Int32? {
        let cache = try MemcachedConnection(
            configuration: try MemcachedConfiguration(servers: TestEnvironment.memcachedServerList),
            logger: Logger(label: "e2e"))
        defer { cache.close() }
        guard case .hit(let item) = cache.get(ProfileCacheEntries.key(for: id)) else { return nil }
        return ProfileCacheEntries.version(of: item.value)
    }

    @Test func onlyTheOwnerOrAnAdminMayWrite() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let url = "\(service.baseURL)/users/profile/\(id)"
        let json = ["Content-Type": "application/json"]
        let owner = json.merging(ServiceProcess.bearer(String(id))) { $1 }

        let created = try Curl.request(
            url, method: "PUT", headers: owner.merging(["If-None-Match": "*"]) { $1 },
            body: #"{"username":"auth\#(id % 1_000_000)","display_name":"Mine"}"#)
        #expect(created.status == 201, "\(created.body)")
        #expect(try Curl.request(url).headers["x-cache"] != nil)  // public read, populates memcached
        let cachedBefore = try cachedVersion(of: id)
        #expect(cachedBefore == 1)

        let update = #"{"display_name":"Hijacked","version":1}"#
        let missing = try Curl.request(url, method: "PUT", headers: json, body: update)
        #expect(missing.status == 401)
        #expect(missing.headers["www-authenticate"] == #"Bearer realm="profile-service""#)
        #expect(missing.headers["content-type"] == "application/problem+json")
        #expect(missing.json?["type"] as? String == "tag:profile-service,2026:unauthenticated")

        let forgedToken = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
        for header in ["Basic dXNlcjpwYXNz", "Bearer", "Bearer a.b", "Bearer " + forgedToken] {
            let refused = try Curl.request(
                url, method: "PUT", headers: json.merging(["Authorization": header]) { $1 }, body: update)
            #expect(refused.status == 401, "\(header)")
            #expect(refused.headers["www-authenticate"] == #"Bearer realm="profile-service", error="invalid_token""#)
            #expect(!refused.body.contains(forgedToken))
        }
        // Authentication comes before the body is even parsed.
        #expect(try Curl.request(url, method: "PUT", headers: json, body: "{not json").status == 401)

        let someoneElse = try Curl.request(
            url, method: "PUT", headers: json.merging(ServiceProcess.bearer(String(id + 1))) { $1 }, body: update)
        #expect(someoneElse.status == 403)
        #expect(someoneElse.headers["content-type"] == "application/problem+json")
        #expect(someoneElse.json?["type"] as? String == "tag:profile-service,2026:forbidden")

        // Nothing changed: not in PostgreSQL (a bypassing read), not in memcached.
        let fresh = try Curl.request(url + "?min_version=1")
        #expect(fresh.json?["version"] as? Int == 1)
        #expect(fresh.json?["display_name"] as? String == "Mine")
        #expect(try cachedVersion(of: id) == cachedBefore)

        let own = try Curl.request(url, method: "PUT", headers: owner, body: #"{"display_name":"Still mine","version":1}"#)
        #expect(own.status == 200, "\(own.body)")
        #expect(own.json?["version"] as? Int == 2)

        let admin = try Curl.request(
            url, method: "PUT", headers: json.merging(ServiceProcess.bearer("support-desk", scope: "profiles:admin")) { $1 },
            body: #"{"display_name":"Fixed by support","version":2}"#)
        #expect(admin.status == 200, "\(admin.body)")
        #expect(admin.json?["version"] as? Int == 3)
        #expect(try cachedVersion(of: id) == 3)
        #expect(service.terminate() == 0, "a clean exit flushes every log line")
        #expect(!service.log.contains(forgedToken))
    }

    @Test func readsNeedATokenOnlyWhenConfigured() throws {
        let service = try ServiceProcess(extraArguments: ["--require-auth-for-reads"])
        defer { _ = service.terminate() }
        let url = "\(service.baseURL)/users/profile/\(Int64.random(in: 1_000_000_000...9_000_000_000_000_000))"
        let anonymous = try Curl.request(url)
        #expect(anonymous.status == 401)
        #expect(anonymous.headers["www-authenticate"] == #"Bearer realm="profile-service""#)
        #expect(try Curl.request(url, headers: ServiceProcess.bearer("anyone")).status == 404)
        #expect(try Curl.request("\(service.baseURL)/healthz").status == 200)
    }

    @Test func authNoneIsExplicitAndWarns() throws {
        let service = try ServiceProcess(authArguments: ["--auth", "none"])
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let created = try Curl.request(
            "\(service.baseURL)/users/profile/\(id)", method: "PUT",
            headers: ["Content-Type": "application/json", "If-None-Match": "*"],
            body: #"{"username":"open\#(id % 1_000_000)","display_name":"Open"}"#)
        #expect(created.status == 201)
        #expect(service.terminate() == 0)
        #expect(service.log.contains("authentication disabled"))
    }

    @Test func tokenSubcommandMintsATokenTheServerAccepts() throws {
        let minted = try ServiceProcess.run(
            ["token", "--sub", "77", "--ttl", "60", "--jwt-secret-file", ServiceProcess.jwtSecretFile])
        let token = minted.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(minted.status == 0)
        #expect(token.split(separator: ".").count == 3)

        let service = try ServiceProcess(extraArguments: ["--require-auth-for-reads"])
        defer { _ = service.terminate() }
        let read = try Curl.request("\(service.baseURL)/users/profile/77", headers: ["Authorization": "Bearer \(token)"])
        #expect(read.status != 401, "\(read.body)")

        let noSecret = try ServiceProcess.run(["token", "--sub", "1"])
        #expect(noSecret.status == 2)
    }
}
