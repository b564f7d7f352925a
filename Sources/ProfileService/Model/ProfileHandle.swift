/// A handle: what a lookup by username compares (docs/design.md §12). It is the username with its
/// ASCII letters in lower case, so `Ada` and `ada` are one handle, held by at most one profile,
/// while the profile keeps the spelling it chose. PostgreSQL computes the same
/// (`profile_handle(username)`, migrations/0007_handles.sql).
public struct ProfileHandle: Hashable, Sendable, CustomStringConvertible {
    /// The handle in lower case: the key of its cache entry and of its reservation.
    public let key: String

    /// The handle of a valid username (3 to 32 of `A-Z a-z 0-9 _ .`); nil for anything else,
    /// which no profile can hold.
    public init?(username: some StringProtocol) {
        guard ProfileValidation.isUsername(username) else { return nil }
        key = String(decoding: username.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Whether `username` spells this handle.
    public func isSpelled(by username: some StringProtocol) -> Bool {
        isSpelled(by: username.utf8)
    }

    /// Whether the UTF-8 bytes of a username spell this handle.
    public func isSpelled(by username: some Collection<UInt8>) -> Bool {
        username.count == key.utf8.count
            && zip(username, key.utf8).allSatisfy { spelled, key in
                spelled == key || ((UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(spelled) && spelled | 0x20 == key)
            }
    }

    public var description: String { key }
}
