import Foundation
import Synchronization
import Testing
import TestSupport

@testable import ProfileClient
import ProfileClientTesting

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
        #expect(transport.requests.last?.headers["If-None-Match"] == "\"2-public\"", "the tag the service sent, as sent")
    }

    /// The service's side of a revalidation: a 304 only for the tag of the reader's view (the
    /// owner's `"2"`, everyone else's `"2-public"`), else the reader's view whole.
    static func service(readerIsOwner: Bool) -> FakeTransport {
        FakeTransport { request, _ throws(TransportError) in
            let sent = (request.headers["If-None-Match"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let own = readerIsOwner ? "\"2\"" : "\"2-public\""
            return sent.contains(own)
                ? TransportResponse(status: 304, headers: ["etag": own]) : Self.answer(ownerView: readerIsOwner)
        }
    }

    @Test func theOwnerRevalidatingThePublicViewFromDiskGetsTheOwnersView() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let stranger = Self.client(Self.service(readerIsOwner: false), file: file, token: Self.token(subject: 9))
        #expect(try await stranger.fetch(id: 7).fields["email"] == nil)
        try await stranger.saveStore()
        #expect(ProfileStoreFile(url: file).loadStore(maximumBytes: 1 << 20).profiles.map(\.tag) == ["\"2-public\""], "kept with its tag")

        // The owner launches with the public view on disk: its tag must not pass for the owner's.
        let transport = Self.service(readerIsOwner: true)
        let owner = Self.client(transport, file: file, token: Self.token(subject: 7))
        let read = try await owner.fetch(id: 7, policy: .reloadFromServer)
        #expect(transport.requests.map { $0.headers["If-None-Match"] } == ["\"2-public\""])
        #expect(read.fields["email"] == "ada@example.com", "not a 304 over the view without it")
        #expect(try await owner.fetch(id: 7, policy: .reloadFromServer) == read, "then the owner's view revalidates")
        #expect(transport.requests.last?.headers["If-None-Match"] == "\"2\"")
        try await owner.saveStore()
        #expect(!String(decoding: try Data(contentsOf: file), as: UTF8.self).contains("ada@example.com"))
    }

    @Test func aStoreWithoutTagsRevalidatesWithTheVersionsTag() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        // A file of a client that kept no tags: the same format, without them.
        try Data(
            #"{"format":1,"profiles":[{"id":7,"username":"user7","display_name":"Ada","version":2,"updated_at":"2026-01-01T00:00:02Z"}]}"#
                .utf8
        ).write(to: file)
        let transport = Self.service(readerIsOwner: false)
        let client = Self.client(transport, file: file, token: Self.token(subject: 9))
        _ = try await client.fetch(id: 7, policy: .reloadFromServer)
        #expect(transport.requests.first?.headers["If-None-Match"] == "\"2\"")
        #expect(transport.requests.first?.url.query == "min_version=2", "the file was read")
    }

    /// The store's file after profile 7 came on its event stream (never read) opened with `token`.
    static func storeAfterStreaming(_ profile: Profile, token: String) async throws -> String {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let events = ControlledEventTransport()
        var configuration = ProfileClientConfiguration(baseURL: URL(string: "http://profiles.test")!, tokenProvider: { token })
        configuration.persistenceFile = file
        configuration.persistenceInterval = .seconds(3600)
        let client = ProfileClient(
            configuration: configuration, transport: FakeTransport { _, _ throws(TransportError) in TransportResponse(status: 404) },
            eventTransport: events)
        let seen = EventRecorder(client.events(for: 7))
        #expect(await events.waitForConnections(1))
        // A stream's answer is `Cache-Control: no-cache`: only the token says whose view it carries.
        events.send(.read([ControlledEventTransport.profile(profile)]))
        #expect(await seen.wait { $0.contains(.updated(profile)) })
        try await client.saveStore()
        return String(decoding: try Data(contentsOf: file), as: UTF8.self)
    }

    @Test func theOwnersViewOnItsEventStreamStaysOffTheDisk() async throws {
        var owners = FakeTransport.profile(7, "Ada", version: 2)
        owners.fields["email"] = "ada@example.com"
        let saved = try await Self.storeAfterStreaming(owners, token: Self.token(subject: 7))
        #expect(!saved.contains("ada@example.com"), "\(saved)")
        let others = try await Self.storeAfterStreaming(FakeTransport.profile(7, "Ada", version: 2), token: Self.token(subject: 9))
        #expect(others.contains("\"id\":7"), "another reader's view is kept as before: \(others)")
    }

    @Test func aStreamsProfilesAreTheOwnersViewForTheTokensSubjectOrAnAdministrator() {
        #expect(PrivateAnswers.ownerViewIDs(streamed: [7, 8], token: Self.token(subject: 7)) == [7])
        #expect(PrivateAnswers.ownerViewIDs(streamed: [7, 8], token: Self.token(subject: 1, scope: "profiles:admin")) == [7, 8])
        #expect(PrivateAnswers.ownerViewIDs(streamed: [7, 8], token: "opaque") == [7, 8], "whose token it is unknown: every one")
        #expect(PrivateAnswers.ownerViewIDs(streamed: [7, 8], token: nil).isEmpty, "no token: the public view")
    }

    @Test func theOwnerPatchesAFieldOnlyTheyReadAndTheAnswerCarriesIt() async throws {
        let service = InMemoryProfileService(
            profiles: [FakeTransport.profile(7, "Ada", version: 1)], fieldNames: ["bio", "email"])
        let client = ProfileClient(
            configuration: ProfileClientConfiguration(
                baseURL: URL(string: "http://profiles.test")!, tokenProvider: { Self.token(subject: 7) }),
            transport: service, eventTransport: nil)
        let written = try await client.edit(id: 7, ProfileChanges(fields: ["email": "ada@example.com"]))
        let sent = try #require(service.receivedRequests.last)
        #expect(sent.method == "PATCH")
        #expect(sent.headers["Authorization"] == "Bearer \(Self.token(subject: 7))")
        let body = try #require(sent.body.flatMap { try JSONSerialization.jsonObject(with: $0) as? [String: String] })
        #expect(body == ["email": "ada@example.com"])
        #expect(written.fields["email"] == "ada@example.com")
        #expect(written.version == 2)
    }

    @Test func anExportRefusedIsTheErrorOfEveryOtherRequest() async throws {
        let file = PersistentStoreTests.file()
        defer { try? FileManager.default.removeItem(at: file) }
        let transport = FakeTransport { request, _ throws(TransportError) in
            request.url.path.hasSuffix("/7/export")
                ? FakeTransport.problem(403, kind: "forbidden") : FakeTransport.problem(401, kind: "unauthorized")
        }
        let client = Self.client(transport, file: file, token: Self.token(subject: 9))
        await #expect(throws: ProfileClientError.forbidden) { try await client.export(id: 7) }
        await #expect(throws: ProfileClientError.unauthorized) { try await client.export(id: 8) }
        #expect(transport.requests.map(\.url.path) == ["/users/profile/7/export", "/users/profile/8/export", "/users/profile/8/export"], "a 401 once more with a fresh token")
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
