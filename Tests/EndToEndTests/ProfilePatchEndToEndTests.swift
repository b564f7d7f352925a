import Foundation
import Synchronization
import Testing
import TestSupport

/// `PATCH /users/profile/{id}` of the built binary: two devices editing one profile through two
/// instances at once, without versions.
@Suite(.serialized, .requires(.postgres, .memcached)) struct ProfilePatchEndToEndTests {
    @Test func twoDevicesPatchingAtOnceBothLandAndEachReadsItsOwnWrite() throws {
        let instances = [try ServiceProcess(), try ServiceProcess()]
        defer { for instance in instances { _ = instance.terminate() } }
        let id = LiveUpdatesEndToEndTests.newID()
        try instances[0].createProfile(id, usernamePrefix: "patch")
        let rounds = 25
        let failures = Mutex<[String]>([])
        let versions = Mutex<[Int]>([])
        let devices = (0..<2).map { device in
            TestThread {
                let url = "\(instances[device].baseURL)/users/profile/\(id)"
                let headers = ServiceProcess.bearer(String(id)).merging(["Content-Type": "application/merge-patch+json"]) { $1 }
                for round in 0..<rounds {
                    let name = "Device \(device) edit \(round)"
                    guard let patched = try? Curl.request(url, method: "PATCH", headers: headers, body: #"{"display_name":"\#(name)"}"#),
                        patched.status == 200, let version = patched.json?["version"] as? Int
                    else {
                        failures.withLock { $0.append("device \(device) round \(round): no 200") }
                        continue
                    }
                    versions.withLock { $0.append(version) }
                    // Read-your-writes from the version the patch answered, through either instance.
                    let read = try? Curl.request("\(instances[(device + round) % 2].baseURL)/users/profile/\(id)?min_version=\(version)")
                    if (read?.json?["version"] as? Int ?? 0) < version {
                        failures.withLock { $0.append("device \(device) round \(round): wrote v\(version), read \(read?.status ?? 0)") }
                    }
                }
            }
        }
        for device in devices { device.join() }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let answered = versions.withLock { $0 }.sorted()
        #expect(answered == Array(2...(1 + 2 * rounds)), "every patch landed, each on its own version: \(answered)")
        let final = try Curl.request("\(instances[1].baseURL)/users/profile/\(id)?min_version=\(1 + 2 * rounds)")
        #expect(final.json?["version"] as? Int == 1 + 2 * rounds)
    }
}
