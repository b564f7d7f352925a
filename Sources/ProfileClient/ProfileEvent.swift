/// What happened to a profile an app observes (``ProfileClient/events(for:)``).
///
/// `updated`, `pending` and `deleted` are the profile's state; `failed` and `resumed` are about following the
/// service's event stream of it, so a screen can say "offline" and then "live" again.
public enum ProfileEvent: Sendable, Hashable {
    /// The profile as the service has it: fetched, written, or from the stream.
    case updated(Profile)
    /// An edit of this client not confirmed yet, shown over the version it was made on, as the
    /// version it will become. Followed by `updated` — its own answer, or a newer version from
    /// elsewhere — or, when it fails, by the profile it was made over.
    case pending(Profile)
    /// The service says no profile has the id (deleted, or never created). A profile created again
    /// later comes as `updated`.
    case deleted(id: Int64)
    /// Following the profile's changes failed. With `willRetry` the client reconnects by itself
    /// (with backoff) and says `resumed` when it is back; without it, following stopped for good
    /// (the service refused the token or the request): observe again to retry.
    case failed(ProfileClientError, willRetry: Bool)
    /// Following works again after a failure; nothing committed meanwhile is missed.
    case resumed
}
