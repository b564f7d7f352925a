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
/// Bounded: each shard forgets everything when it reaches ``shardCapacity`` entries.
final class VerifiedClaimsCache: Sendable {
    static let shardCapacity = 256

    private final class Shard: Sendable {
        let claims = Mutex<[[UInt8]: TokenClaims]>([:])
    }

    private let shards: [Shard] = (0..<8).map { _ in Shard() }

    private func shard(_ key: [UInt8]) -> Shard {
        shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
    }

    func claims(of token: Substring) -> TokenClaims? {
        let key = Array(token.utf8)
        return shard(key).claims.withLock { $0[key] }
    }

    func insert(_ claims: TokenClaims, of token: Substring) {
        let key = Array(token.utf8)
        shard(key).claims.withLock { cached in
            if cached.count >= Self.shardCapacity { cached.removeAll(keepingCapacity: true) }
            cached[key] = claims
        }
    }
}
