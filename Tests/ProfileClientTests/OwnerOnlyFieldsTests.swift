import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient

/// Fields only their owner reads, on the client's side (docs/client.md): the owner's view is kept
/// off the disk unless the app opts in, each view is revalidated with its own tag, and the export
/// comes back as the service sent it.
@Suite(.timeLimit(.minutes(1))) struct OwnerOnlyFieldsTests {
    /// An HS256-shaped token whose claims the client reads (the signature is the service's business).
    static func token(subject: Int64, scope: String? = nil) -> String {
        var claims: [String: Any] = ["sub": String(subject), "exp": 4_102_444_800]
        if let scope { claims["scope"] = scope }
        let encode = { (data: Data) in
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        return encode(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "."
            + encode(try! JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])) + ".c2lnbmF0dXJl"
    }

    /// Profile 7 with its email (the owner's view, private) or without (the public view).
    static func answer(ownerView: Bool, version: Int32 = 2) -> TransportResponse {
        var profile = FakeTransport.profile(7, "Ada", version: version)
        if ownerView { profile.fields["email"] = "ada@example.com" }
        var response = FakeTransport.json(profile)
        response.headers["cache-control"] = ownerView ? "private, no-cache" : "no-cache"
        response.headers["etag"] = ownerView ? "\"\(version)\"" : "\"\(version)-public\""
        return response
    }

    static func client(_ transport: FakeTransport, file: URL, token: String, persistsPrivateProfiles: Bool = false) -> ProfileClient {
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!, tokenProvider: { token })
        configuration.persistenceFile = file
        configuration.persistenceInterval = .seconds(3600)
        configuration.persistsPrivateProfiles = persistsPrivateProfiles
        configuration.retry = RetryPolicy(maximumAttempts: 1)
        return ProfileClient(configuration: configuration, transport: transport, eventTransport: nil)
    }

    @Test(arguments: [false, true])
    func theOwnersViewStaysOffTheDiskUnlessTheAppOptsIn(optedIn: Bool) async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let transport = FakeTransport { request, _ throws(TransportError) in
            request.url.path.hasSuffix("/7") ? Self.answer(ownerView: true) : FakeTransport.json(FakeTransport.profile(8, "Bob", version: 1))
        }
        let client = Self.client(transport, file: file, token: Self.token(subject: 7), persistsPrivateProfiles: optedIn)
        #expect(try await client.fetch(id: 7).fields["email"] == "ada@example.com", "the owner reads it")
        _ = try await client.fetch(id: 8)
        try await client.saveStore()
        let saved = String(decoding: try Data(contentsOf: file), as: UTF8.self)
        #expect(saved.contains("Bob"), "public profiles are kept as before")
        #expect(saved.contains("ada@example.com") == optedIn, "\(saved)")
        #expect(saved.contains("\"id\":7") == optedIn)
    }

    @Test func aPrivateListMarksTheSubjectsProfileAndAnAdministratorsMarksEvery() throws {
        let body = try JSONSerialization.data(withJSONObject: ["profiles": [["id": 7], ["id": 8]], "missing": []])
        let list = TransportResponse(status: 200, headers: ["cache-control": "private, no-cache"], body: body)
        #expect(PrivateAnswers.ownerViewIDs(in: list, token: Self.token(subject: 7)) == [7])
        #expect(PrivateAnswers.ownerViewIDs(in: list, token: Self.token(subject: 1, scope: "profiles:admin")) == [7, 8])
        #expect(PrivateAnswers.ownerViewIDs(in: list, token: nil) == [7, 8], "whose token it is unknown: every one")
        var publicList = list
        publicList.headers["cache-control"] = "no-cache"
        #expect(PrivateAnswers.ownerViewIDs(in: publicList, token: Self.token(subject: 7)).isEmpty)
    }

    @Test func eachViewIsRevalidatedWithItsOwnTag() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let ownerView = ManagedFlag(true)
        let transport = FakeTransport { request, _ throws(TransportError) in
            request.headers["If-None-Match"] == nil ? Self.answer(ownerView: ownerView.value) : TransportResponse(status: 304)
        }
        let owner = Self.client(transport, file: file, token: Self.token(subject: 7))
        _ = try await owner.fetch(id: 7)
        #expect(try await owner.fetch(id: 7, policy: .reloadFromServer).fields["email"] == "ada@example.com")
        #expect(transport.requests.last?.headers["If-None-Match"] == "\"2\"", "the owner's view: its tag alone")

        ownerView.value = false
        let other = Self.client(transport, file: file, token: Self.token(subject: 9))
        _ = try await other.fetch(id: 7)
        _ = try await other.fetch(id: 7, policy: .reloadFromServer)
        #expect(transport.requests.last?.headers["If-None-Match"] == "\"2-public\", \"2\"")
    }

    @Test func anExportIsTheServicesDocumentAndNeverKept() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let document = Data(#"{"exported_at":"2026-11-28T21:00:00.000Z","profile":{"id":7,"email":"ada@example.com"}}"#.utf8)
        let transport = FakeTransport { request, _ throws(TransportError) in
            switch request.url.path {
            case "/users/profile/7/export":
                TransportResponse(status: 200, headers: ["cache-control": "private, no-store"], body: document)
            default:
                TransportResponse(status: 404, headers: ["content-type": "application/problem+json"], body: Data(#"{"status":404}"#.utf8))
            }
        }
        let client = Self.client(transport, file: file, token: Self.token(subject: 7))
        #expect(try await client.export(id: 7) == document)
        #expect(transport.requests.first?.headers["Authorization"] == "Bearer \(Self.token(subject: 7))")
        await #expect(throws: ProfileClientError.notFound) { try await client.export(id: 8) }
        try await client.saveStore()
        #expect(!((try? String(contentsOf: file, encoding: .utf8)) ?? "").contains("ada@example.com"))
    }
}

/// A flag a transport's handler reads while a test changes it.
final class ManagedFlag: Sendable {
    private let stored: Mutex<Bool>
    init(_ value: Bool) { stored = Mutex(value) }
    var value: Bool {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
