import ArgumentParser
import Foundation
import ProfileClient

/// `profilectl`: read, update and watch profiles through ``ProfileClient``, for operators.
///
/// ```sh
/// profilectl get 42 --url http://127.0.0.1:8080
/// profilectl get 42 7 19 | jq .display_name   # one list request
/// profilectl get @ada | jq .id                 # by username
/// profilectl patch 42 --username ada_l         # a rename
/// profilectl put 42 --display-name "Ada Lovelace" --version 3
/// profilectl watch 42                # each new version, live; {"deleted":42} when it goes
/// profilectl watch 42 7 19           # one stream for the list; {"deleted":7} when 7 goes
/// profilectl export 42 --token-file t > profile-42.json   # everything kept, for its owner
/// ```
@main
struct ProfileCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profilectl",
        abstract: "Read, update and watch profiles of profile-service.",
        subcommands: [Get.self, Put.self, Patch.self, Delete.self, Watch.self, Export.self])

    /// Options of every subcommand.
    struct Connection: ParsableArguments {
        @Option(help: "The service's base URL (PROFILECTL_URL).")
        var url: String = ProcessInfo.processInfo.environment["PROFILECTL_URL"] ?? "http://127.0.0.1:8080"

        @Option(help: "Bearer token to send (PROFILECTL_TOKEN); none by default.")
        var token: String?

        @Option(
            help: ArgumentHelp(
                "A file holding the bearer token (PROFILECTL_TOKEN_FILE), read again for each request.",
                discussion: "Keeps the token out of argv and the environment; a token rotated in the file is used."))
        var tokenFile: String?

        /// `--token-file`, else `PROFILECTL_TOKEN_FILE`.
        var tokenPath: String? { tokenFile ?? ProcessInfo.processInfo.environment["PROFILECTL_TOKEN_FILE"] }

        func validate() throws {
            guard let parsed = URL(string: url), parsed.scheme == "http" || parsed.scheme == "https", parsed.host != nil
            else { throw ValidationError("--url must be an http(s) URL such as http://127.0.0.1:8080") }
            if token != nil, tokenFile != nil { throw ValidationError("give --token or --token-file, not both") }
            if let tokenPath, !FileManager.default.isReadableFile(atPath: tokenPath) {
                throw ValidationError("--token-file \(tokenPath) is not a readable file")
            }
        }

        func makeClient() -> ProfileClient {
            var configuration = ProfileClientConfiguration(baseURL: URL(string: url)!)
            if let tokenPath {
                configuration.tokenProvider = { try Self.readToken(from: tokenPath) }
            } else if let token = token ?? ProcessInfo.processInfo.environment["PROFILECTL_TOKEN"] {
                configuration.tokenProvider = { token }
            }
            return ProfileClient(configuration: configuration)
        }

        /// The token in `path`, without the line end editors and `echo` add.
        static func readToken(from path: String) throws -> String {
            try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    static func print(_ profile: Profile) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(profile)) ?? Data()
        // Written, not printed: print's stdout is block-buffered into a pipe, and each profile must
        // reach `profilectl watch 1 | jq` at once.
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    /// Edits the profile, reading it first: a network failure then ends the command, where an
    /// edit alone would wait for the network to come back; one that still gets no answer within
    /// 30 s ends it with `timedOut`.
    static func edit(_ client: ProfileClient, id: Int64, _ changes: ProfileChanges, expectedVersion: Int32?)
        async throws(ProfileClientError) -> Profile
    {
        _ = try await client.fetch(id: id)
        do {
            return try await withThrowingTaskGroup(of: Profile.self) { group in
                group.addTask { try await client.edit(id: id, changes, expectedVersion: expectedVersion) }
                group.addTask {
                    try await Task.sleep(for: .seconds(30))
                    throw ProfileClientError.timedOut
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        } catch let error as ProfileClientError {
            throw error
        } catch {
            throw .cancelled
        }
    }

    /// Reports a client error on standard error and exits with status 1.
    static func fail(_ error: ProfileClientError) -> ExitCode {
        let message: String
        switch error {
        case .conflict(let current): message = "conflict: the profile is at version \(current.version)"
        case .notFound: message = "not found"
        case .unauthorized: message = "unauthorized: pass a valid --token or --token-file"
        case .forbidden: message = "forbidden"
        case .usernameTaken: message = "username taken: another profile holds it or has it reserved"
        case .validation(let field, let detail): message = "refused\(field.map { " (\($0))" } ?? ""): \(detail)"
        case .unavailable(let retryAfter): message = "unavailable\(retryAfter.map { "; retry after \($0)" } ?? "")"
        case .rateLimited(let retryAfter): message = "too many requests\(retryAfter.map { "; retry after \($0)" } ?? "")"
        case .serverError(let status, _, let detail): message = "server error \(status)\(detail.map { ": \($0)" } ?? "")"
        case .offline: message = "offline: no network"
        case .timedOut: message = "no answer in time"
        case .tls(let description): message = "TLS failed: \(description)"
        case .cancelled: message = "cancelled"
        case .decoding(let field, let detail): message = "undecodable answer\(field.map { " (\($0))" } ?? ""): \(detail)"
        case .transport(let description): message = "no answer: \(description)"
        case .tokenUnavailable(let description): message = "cannot read the token: \(description)"
        case .unexpectedStatus(let status, let detail): message = "HTTP \(status)\(detail.map { ": \($0)" } ?? "")"
        }
        FileHandle.standardError.write(Data("profilectl: \(message)\n".utf8))
        return ExitCode.failure
    }
}

extension ProfileCtl {
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print profiles as JSON, one line each (several: one list request per 100).",
            discussion: """
                Name profiles by id (get 42 7) or by username with @ (get @ada @bob), not both. A username \
                its profile renamed away from finds the profile under its new username. An id or username \
                no profile has is reported on standard error; the exit status is then 1.
                """)

        @OptionGroup var connection: Connection
        @Argument(help: ArgumentHelp("The profile ids, or @usernames.", valueName: "id-or-@username"))
        var profiles: [String]

        /// The ids named, when every argument is one.
        var ids: [Int64]? {
            let ids = profiles.compactMap { Int64($0) }
            return ids.count == profiles.count ? ids : nil
        }

        /// The usernames named (without their `@`), when every argument is one.
        var usernames: [String]? {
            guard profiles.allSatisfy({ $0.hasPrefix("@") }) else { return nil }
            return profiles.map { String($0.dropFirst()) }
        }

        func validate() throws {
            guard !profiles.isEmpty else { throw ValidationError("name at least one profile id or @username") }
            if let usernames {
                guard usernames.allSatisfy({ !$0.isEmpty }) else { throw ValidationError("a username follows its @") }
                return
            }
            guard let ids else {
                throw ValidationError("name profiles by id (42) or by @username (@ada), not both")
            }
            guard ids.allSatisfy({ $0 > 0 }) else { throw ValidationError("profile ids are positive integers") }
        }

        func run() async throws {
            let client = connection.makeClient()
            let found: [Profile]
            let missing: [String]
            do {
                if let usernames {
                    if usernames.count == 1 {
                        ProfileCtl.print(try await client.fetch(username: usernames[0]))
                        return
                    }
                    let list = try await client.profiles(usernames: usernames)
                    (found, missing) = (list.profiles, list.missing.map { "@\($0)" })
                } else {
                    let ids = ids ?? []
                    if ids.count == 1 {
                        ProfileCtl.print(try await client.fetch(id: ids[0]))
                        return
                    }
                    let list = try await client.profiles(ids: ids)
                    (found, missing) = (list.profiles, list.missing.map(String.init))
                }
            } catch {
                throw ProfileCtl.fail(error)
            }
            for profile in found { ProfileCtl.print(profile) }
            guard missing.isEmpty else {
                FileHandle.standardError.write(Data("profilectl: not found: \(missing.joined(separator: ", "))\n".utf8))
                throw ExitCode.failure
            }
        }
    }

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a display name (or create a profile with --username) and print the result.")

        @OptionGroup var connection: Connection
        @Argument(help: "The profile id.") var id: Int64
        @Option(help: "The new display name.") var displayName: String
        @Option(help: "The expected current version; read from the service when omitted.") var version: Int32?
        @Option(help: "Create the profile with this username instead of updating it.") var username: String?

        func validate() throws {
            if username != nil, version != nil { throw ValidationError("--username creates; it takes no --version") }
            if let version, version < 1 { throw ValidationError("--version must be at least 1") }
        }

        func run() async throws {
            let client = connection.makeClient()
            do {
                if let username {
                    ProfileCtl.print(try await client.create(id: id, username: username, displayName: displayName))
                    return
                }
                ProfileCtl.print(
                    try await ProfileCtl.edit(client, id: id, ProfileChanges(displayName: displayName), expectedVersion: version))
            } catch {
                throw ProfileCtl.fail(error)
            }
        }
    }

    struct Patch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a display name, username or fields with a patch (no version needed) and print the result.",
            discussion: """
                Only what is named changes: --set bio='Hello' --unset website leaves every other field as it is. \
                Without --version the patch applies over the version read first, and over any change made since \
                to other members; a change made since to a member it sets is a conflict. \
                --username renames the profile; its old username stays reserved for it for a while, and \
                lookups of the old one find it. A username another profile holds or has reserved is refused.
                """)

        @OptionGroup var connection: Connection
        @Argument(help: "The profile id.") var id: Int64
        @Option(help: "The new display name.") var displayName: String?
        @Option(help: "The new username (a rename).") var username: String?
        @Option(name: .customLong("set"), help: ArgumentHelp("Set a profile field (repeatable).", valueName: "field=value"))
        var assignments: [String] = []
        @Option(name: .customLong("unset"), help: ArgumentHelp("Unset a profile field (repeatable).", valueName: "field"))
        var unsetFields: [String] = []
        @Option(help: "Patch only at this version (409 otherwise).") var version: Int32?

        /// The fields to change: `--set` values, `--unset` as nil.
        var fields: [String: String?] {
            var fields: [String: String?] = [:]
            for assignment in assignments {
                let parts = assignment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                fields[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
            }
            for name in unsetFields { fields[name] = .some(nil) }
            return fields
        }

        func validate() throws {
            guard id > 0 else { throw ValidationError("profile ids are positive integers") }
            if let version, version < 1 { throw ValidationError("--version must be at least 1") }
            for assignment in assignments where !assignment.contains("=") || assignment.hasPrefix("=") {
                throw ValidationError("--set takes field=value, got \(assignment)")
            }
            guard displayName != nil || username != nil || !assignments.isEmpty || !unsetFields.isEmpty else {
                throw ValidationError("nothing to patch: give --display-name, --username, --set or --unset")
            }
        }

        func run() async throws {
            do {
                let changes = ProfileChanges(displayName: displayName, username: username, fields: fields)
                ProfileCtl.print(try await ProfileCtl.edit(connection.makeClient(), id: id, changes, expectedVersion: version))
            } catch {
                throw ProfileCtl.fail(error)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a profile (its owner's token, or an administrator's); prints nothing.",
            discussion: "An id no profile has is reported on standard error; the exit status is then 1.")

        @OptionGroup var connection: Connection
        @Argument(help: "The profile id.") var id: Int64
        @Option(help: "Delete only at this version (409 otherwise).") var version: Int32?

        func validate() throws {
            guard id > 0 else { throw ValidationError("profile ids are positive integers") }
            if let version, version < 1 { throw ValidationError("--version must be at least 1") }
        }

        func run() async throws {
            do {
                try await connection.makeClient().delete(id: id, expectedVersion: version)
            } catch {
                throw ProfileCtl.fail(error)
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print everything the service keeps about a profile (its owner's token, or an administrator's).",
            discussion: """
                One JSON document, as the service sent it, on one line: every field (those only the \
                owner reads included), created_at, updated_at, the version, the usernames still \
                reserved for it and what each field is. A profile that does not exist (or was \
                deleted) is reported on standard error; the exit status is then 1.
                """)

        @OptionGroup var connection: Connection
        @Argument(help: "The profile id.") var id: Int64

        func validate() throws {
            guard id > 0 else { throw ValidationError("profile ids are positive integers") }
        }

        func run() async throws {
            let document: Data
            do {
                document = try await connection.makeClient().export(id: id)
            } catch {
                throw ProfileCtl.fail(error)
            }
            FileHandle.standardOutput.write(document + Data("\n".utf8))
        }
    }

    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print profiles, then each new version as it is committed (the service's event streams).",
            discussion: """
                Each line is one JSON object, written at once (also into a pipe).

                One id: its profile, then each new version (the id's event stream), or \
                {"deleted":ID} when no profile has the id (deleted, or not created yet); a profile \
                created again is printed as a profile. A lost stream is reported on standard error \
                and reopened.

                Several ids: one event stream for the whole list (/users/profiles/events). First a \
                line for each id in the order given, then a line for each change: the profile, or \
                {"deleted":ID} when no profile has the id (deleted, or not created yet); a profile \
                created again is printed as a profile. Only the newest version of a burst is printed.

                  profilectl watch 1 2 3 | jq -c 'select(.deleted == null) | {id, display_name}'

                Exit status: 0 after --count lines; 1, with the reason on standard error, when the \
                service refuses the stream for good (401 after a fresh token, 403, 400).
                """)

        @OptionGroup var connection: Connection
        @Argument(help: "The profile ids.") var ids: [Int64]
        @Option(help: "Stop after printing this many lines (0: never).") var count: Int = 0

        func validate() throws {
            guard !ids.isEmpty else { throw ValidationError("name at least one profile id") }
            guard ids.allSatisfy({ $0 > 0 }) else { throw ValidationError("profile ids are positive integers") }
            guard count >= 0 else { throw ValidationError("--count must not be negative") }
        }

        func run() async throws {
            let client = connection.makeClient()
            if Set(ids).count == 1 {
                try await watchOne(ids[0], client: client)
            } else {
                try await watchList(client: client)
            }
        }

        private func watchOne(_ id: Int64, client: ProfileClient) async throws {
            let events = client.events(for: id)
            do {
                _ = try await client.fetch(id: id, policy: .reloadFromServer)
            } catch .notFound {
                // Printed as {"deleted":ID} from the events.
            } catch {
                throw ProfileCtl.fail(error)
            }
            var printed = 0
            for await event in events {
                switch event {
                case .updated(let profile): ProfileCtl.print(profile)
                case .pending: continue  // profilectl watch makes no edits
                case .deleted(let id): FileHandle.standardOutput.write(Data("{\"deleted\":\(id)}\n".utf8))
                case .failed(let error, willRetry: false): throw ProfileCtl.fail(error)
                case .failed(let error, willRetry: true):
                    FileHandle.standardError.write(Data("profilectl: the stream failed (\(error)); reconnecting\n".utf8))
                    continue
                case .resumed: continue
                }
                printed += 1
                if count > 0, printed >= count { return }
            }
        }

        /// Prints what changed between consecutive lists, in the order of the ids given.
        private func watchList(client: ProfileClient) async throws {
            var printed: [Int64: Profile?] = [:]  // the last line of each id: a profile, or deleted (nil)
            var lines = 0
            do {
                for try await list in client.observeList(ids: ids) {
                    var now: [Int64: Profile?] = [:]
                    for profile in list.profiles { now[profile.id] = profile }
                    for id in list.missing { now[id] = .some(nil) }
                    for id in ids {
                        guard let current = now[id], printed[id] != current else { continue }
                        printed[id] = current
                        if let profile = current {
                            ProfileCtl.print(profile)
                        } else {
                            FileHandle.standardOutput.write(Data("{\"deleted\":\(id)}\n".utf8))
                        }
                        lines += 1
                        if count > 0, lines >= count { return }
                    }
                }
            } catch let error as ProfileClientError {
                throw ProfileCtl.fail(error)
            }
        }
    }
}
