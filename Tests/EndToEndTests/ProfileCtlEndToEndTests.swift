import Foundation
import Synchronization
import Testing
import TestSupport

/// `profilectl` as an operator uses it: its output piped into another program.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ProfileCtlEndToEndTests {
    @Test func watchPrintsEachVersionIntoAPipeAsItArrives() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        try service.createProfile(id, usernamePrefix: "ctl")

        let watch = try PipedProcess(
            ServiceProcess.executable.deletingLastPathComponent().appendingPathComponent("profilectl"),
            arguments: ["watch", String(id), "--url", service.baseURL, "--count", "2"])
        func lines() -> [String] { watch.lines }

        // The current version reaches the pipe while profilectl keeps watching, not when it exits.
        #expect(Eventually.wait(timeout: .seconds(10)) { lines().count >= 1 }, "nothing reached the pipe")
        #expect(watch.isRunning)
        #expect(lines().first?.contains(#""version":1"#) == true, "\(lines())")

        let renamed = try Curl.request(
            "\(service.baseURL)/users/profile/\(id)", method: "PUT", headers: ServiceProcess.writeHeaders(for: id),
            body: #"{"display_name":"Second","version":1}"#)
        #expect(renamed.status == 200)
        #expect(Eventually.wait(timeout: .seconds(10)) { lines().count >= 2 }, "\(lines())")
        #expect(lines().last?.contains(#""version":2"#) == true)
        #expect(watch.waitUntilExit() == 0)
    }

    @Test func getOfSeveralIDsPrintsOneLineEachInOrderAndReportsTheMissing() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let ids = (0..<3).map { _ in Int64.random(in: 1_000_000_000...9_000_000_000_000_000) }
        for id in ids { try service.createProfile(id, usernamePrefix: "cg") }
        let profilectl = ServiceProcess.executable.deletingLastPathComponent().appendingPathComponent("profilectl")

        let found = try TestProcess.run(profilectl, ["get"] + [ids[2], ids[0], ids[1]].map(String.init) + ["--url", service.baseURL])
        #expect(found.status == 0, "\(found.standardError)")
        let lines = found.standardOutput.split(separator: "\n").map(String.init)
        let printed = lines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? Int
        }
        #expect(printed.map(Int64.init) == [ids[2], ids[0], ids[1]], "one JSON line per profile, in order: \(lines)")

        let absent = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        let partly = try TestProcess.run(profilectl, ["get", String(ids[0]), String(absent), "--url", service.baseURL])
        #expect(partly.status == 1)
        #expect(partly.standardOutput.split(separator: "\n").count == 1)
        #expect(partly.standardError.contains("not found: \(absent)"), "\(partly.standardError)")
    }

    /// `profilectl export` with the owner's token prints the service's document on one line, as a
    /// script pipes it into jq; another user's token and a missing profile exit 1.
    @Test func exportPrintsTheDocumentForItsOwnerOnly() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        try service.createProfile(id, usernamePrefix: "cx")
        let profilectl = ServiceProcess.executable.deletingLastPathComponent().appendingPathComponent("profilectl")
        let owner = try ServiceProcess.token(subject: String(id))
        let exported = try TestProcess.run(profilectl, ["export", String(id), "--url", service.baseURL, "--token", owner])
        #expect(exported.status == 0, "\(exported.standardError)")
        #expect(exported.standardOutput.split(separator: "\n").count == 1)
        let document = try JSONSerialization.jsonObject(with: Data(exported.standardOutput.utf8)) as? [String: Any]
        #expect((document?["profile"] as? [String: Any])?["id"] as? Int64 == id)
        #expect(document?["created_at"] is String && document?["fields"] is [Any])

        let stranger = try ServiceProcess.token(subject: String(id + 1))
        let refused = try TestProcess.run(profilectl, ["export", String(id), "--url", service.baseURL, "--token", stranger])
        #expect(refused.status == 1 && refused.standardOutput.isEmpty && refused.standardError.contains("forbidden"))
        let absent = try TestProcess.run(
            profilectl, ["export", String(id + 2), "--url", service.baseURL, "--token", try ServiceProcess.token(subject: String(id + 2))])
        #expect(absent.status == 1 && absent.standardError.contains("not found"), "\(absent.standardError)")
    }

    /// `profilectl get @name` piped into jq, a rename with `patch --username`, and the old name's
    /// lookup following the service's redirect to the profile, on the real servers.
    @Test func getByHandleFindsTheProfileBeforeAndAfterARename() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        try service.createProfile(id, usernamePrefix: "Ctl_")
        let old = "Ctl_\(id % 100_000_000)"
        let new = "ctl_new_\(id % 100_000_000)"
        let profilectl = ServiceProcess.executable.deletingLastPathComponent().appendingPathComponent("profilectl")
        func idPrinted(_ run: TestProcess.Finished) -> Int64? {
            ((try? JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8))) as? [String: Any])?["id"] as? Int64
        }

        let found = try TestProcess.run(profilectl, ["get", "@\(old.lowercased())", "--url", service.baseURL])
        #expect(found.status == 0 && idPrinted(found) == id, "\(found.standardOutput) \(found.standardError)")
        let token = String(ServiceProcess.bearer(String(id))["Authorization"]?.dropFirst("Bearer ".count) ?? "")
        let renamed = try TestProcess.run(
            profilectl, ["patch", String(id), "--username", new, "--url", service.baseURL, "--token", token])
        #expect(renamed.status == 0 && renamed.standardOutput.contains(#""username":"\#(new)""#), "\(renamed.standardError)")
        for name in [new, old] {
            let after = try TestProcess.run(profilectl, ["get", "@\(name)", "--url", service.baseURL])
            #expect(after.status == 0 && idPrinted(after) == id, "@\(name): \(after.standardOutput) \(after.standardError)")
        }
        let absent = try TestProcess.run(profilectl, ["get", "@nobody_\(id % 100_000_000)", "--url", service.baseURL])
        #expect(absent.status == 1 && absent.standardOutput.isEmpty, "\(absent.standardError)")
    }

    @Test func patchThenDeleteAndExitWithOneWhenTheProfileIsGoneAlready() throws {
        let service = try ServiceProcess()
        defer { _ = service.terminate() }
        let id = Int64.random(in: 1_000_000_000...9_000_000_000_000_000)
        try service.createProfile(id, usernamePrefix: "cd")
        let profilectl = ServiceProcess.executable.deletingLastPathComponent().appendingPathComponent("profilectl")
        let token = String(ServiceProcess.bearer(String(id))["Authorization"]?.dropFirst("Bearer ".count) ?? "")
        let arguments = ["delete", String(id), "--url", service.baseURL, "--token", token]
        let patched = try TestProcess.run(profilectl, ["patch", String(id), "--display-name", "Patched"] + arguments.dropFirst(2))
        #expect(patched.status == 0 && patched.standardOutput.contains(#""version":2"#), "\(patched.standardError)")
        // Fields, as a script pipes them into jq: one JSON object on standard output.
        let fields = try TestProcess.run(
            profilectl, ["patch", String(id), "--set", "bio=Line one=still one", "--set", "website=https://example.com", "--unset", "location"]
                + arguments.dropFirst(2))
        let object = try JSONSerialization.jsonObject(with: Data(fields.standardOutput.utf8)) as? [String: Any]
        #expect(fields.status == 0 && object?["bio"] as? String == "Line one=still one" && object?["version"] as? Int == 3,
            "\(fields.standardOutput) \(fields.standardError)")
        #expect(object?["website"] as? String == "https://example.com" && object?["display_name"] as? String == "Patched")
        let undeclared = try TestProcess.run(profilectl, ["patch", String(id), "--set", "pronouns=they"] + arguments.dropFirst(2))
        #expect(undeclared.status == 1 && undeclared.standardError.contains("pronouns"), "\(undeclared.standardError)")
        let stale = try TestProcess.run(profilectl, arguments + ["--version", "2"])
        #expect(stale.status == 1 && stale.standardError.contains("conflict"), "\(stale.standardError)")
        let deleted = try TestProcess.run(profilectl, arguments)
        #expect(deleted.status == 0, "\(deleted.standardError)")
        #expect(deleted.standardOutput.isEmpty)
        #expect(try Curl.request("\(service.baseURL)/users/profile/\(id)").status == 404)
        let again = try TestProcess.run(profilectl, arguments)
        #expect(again.status == 1 && again.standardError.contains("not found"), "\(again.standardError)")
    }
}
