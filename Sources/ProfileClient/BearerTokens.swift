/// The bearer tokens of one client: the provider's token for every attempt, and one refresh of a
/// token the service refused, however many requests it refused.
///
/// A 401 hands the refused token to ``ProfileClientConfiguration/tokenRejected`` once: requests
/// refused with the same token meanwhile wait for that refresh and share the provider's answer
/// to it; those refused with it later ask the provider without a second refresh — unless that
/// refresh gave no fresh token (the provider threw, or returned the refused one again).
final class BearerTokens: Sendable {
    private enum Refresh {
        case running(Task<Result<String?, ProfileClientError>, Never>)
        case done
    }

    private let provider: ProfileClientConfiguration.TokenProvider?
    private let rejected: (@Sendable (_ token: String) async -> Void)?
    /// The refresh of the token refused last.
    private let refresh = LockedValue<(token: String, state: Refresh)?>(nil)

    init(configuration: ProfileClientConfiguration) {
        provider = configuration.tokenProvider
        rejected = configuration.tokenRejected
    }

    /// The token of the next attempt, from the provider; after a 401, `refused` is the token the
    /// service refused, handed to `tokenRejected` first (once) so the provider returns a fresh one.
    /// - Throws: ``ProfileClientError/tokenUnavailable(_:)`` when the provider throws.
    func token(replacing refused: String?) async throws(ProfileClientError) -> String? {
        guard let provider else { return nil }
        guard let refused else { return try await Self.ask(provider) }
        let running: Task<Result<String?, ProfileClientError>, Never>? = refresh.withLock { refresh in
            if let refresh, refresh.token == refused {
                if case .running(let task) = refresh.state { return task }
                return nil  // refreshed already: the provider has the fresh token
            }
            let task = Task { [rejected] () -> Result<String?, ProfileClientError> in
                await rejected?(refused)
                do throws(ProfileClientError) {
                    return .success(try await Self.ask(provider))
                } catch {
                    return .failure(error)
                }
            }
            refresh = (refused, .running(task))
            return task
        }
        guard let running else { return try await Self.ask(provider) }
        let result = await running.value
        refresh.withLock { refresh in
            guard let current = refresh, case .running(let task) = current.state, task == running else { return }
            // A refresh that gave no fresh token is not one: the next refusal asks for another.
            if case .success(let token) = result, token != refused { refresh?.state = .done } else { refresh = nil }
        }
        return try result.get()
    }

    private static func ask(_ provider: ProfileClientConfiguration.TokenProvider)
        async throws(ProfileClientError) -> String?
    {
        do {
            return try await provider()
        } catch {
            throw .tokenUnavailable(String(describing: error))
        }
    }
}
