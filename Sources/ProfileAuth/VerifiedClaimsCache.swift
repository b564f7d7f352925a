import Glibc
import Synchronization

/// Claims of tokens whose signature has verified, by token, so that a client sending the same
/// token again skips the base64, the JSON decoding and the signature: they were 19 % of the CPU
/// of a PUT (perf, HS256; Foundation's `JSONDecoder` twice per request).
///
/// Safe because the key is the whole compact token, byte for byte (not `String` equality, which
/// is canonical equivalence: U+212A KELVIN SIGN equals "K") — header, payload and signature — so
/// another signature is another key and is verified in full, and the keys never change while the
/// process runs. The time-dependent checks (`exp`, `nbf`, `iat`) run again on every use.
///
/// One shard per calling thread (by its `pthread_t`, so two threads share one only by chance):
/// workers send the same tokens again and again, and one lock per token made every worker wait
/// on the others (2.7 % of the machine's CPU under a PUT load with one token, perf). A token is
/// then verified once per thread that sees it, which is cheap beside verifying it per request.
///
/// Bounded: each shard forgets everything when it reaches ``shardCapacity`` entries. The bound
/// holds the tokens of the users active on one event loop within a token's life: reads verify their
/// token while owner-only fields are declared, so every reader's token passes here, and a bound
/// below the tokens in use would verify each again and again. A token and its claims take about
/// 0.5 KB: 2 MB a shard at most.
final class VerifiedClaimsCache: Sendable {
    static let shardCapacity = 4_096
    static let shardCount = 32

    private final class Shard: Sendable {
        let claims = Mutex<[Key: Verified]>([:])
    }

    /// What a verified token's later uses need: its claims, and its scopes as a set (made once).
    struct Verified: Sendable {
        let claims: TokenClaims
        let scopes: Set<String>
    }

    /// A token's bytes, hashed in one call (the synthesized hash of `[UInt8]` feeds the hasher
    /// byte by byte, which showed in a PUT's profile).
    private struct Key: Hashable {
        let bytes: [UInt8]

        func hash(into hasher: inout Hasher) {
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    private let shards: [Shard] = (0..<shardCount).map { _ in Shard() }

    /// The calling thread's shard.
    private var shard: Shard {
        // pthread_t is the thread's descriptor address: mix it so nearby addresses spread out.
        let mixed = (UInt64(pthread_self()) &* 0x9E37_79B9_7F4A_7C15) >> 32
        return shards[Int(mixed % UInt64(Self.shardCount))]
    }

    func verified(_ token: Substring) -> Verified? {
        let key = Key(bytes: Array(token.utf8))
        return shard.claims.withLock { $0[key] }
    }

    func insert(_ verified: Verified, of token: Substring) {
        let key = Key(bytes: Array(token.utf8))
        shard.claims.withLock { cached in
            if cached.count >= Self.shardCapacity { cached.removeAll(keepingCapacity: true) }
            cached[key] = verified
        }
    }
}
