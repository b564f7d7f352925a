import Foundation

/// The registered claims the service reads (RFC 7519 §4.1), plus the two common spellings of
/// OAuth scopes. A claim of the wrong JSON type fails decoding, and so the token.
struct TokenClaims: Codable, Sendable {
    var sub: String?
    var exp: NumericDate?
    var nbf: NumericDate?
    var iat: NumericDate?
    var iss: String?
    var aud: Audience?
    /// RFC 8693 §4.2: space-separated.
    var scope: String?
    /// The array form some identity providers issue.
    var scopes: [String]?
}

/// RFC 7519 §2 NumericDate: seconds since the epoch, possibly with a fraction.
struct NumericDate: Codable, Sendable {
    var value: Date

    init(_ value: Date) {
        self.value = value
    }

    init(from decoder: any Decoder) throws {
        value = Date(timeIntervalSince1970: try decoder.singleValueContainer().decode(Double.self))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Int64(value.timeIntervalSince1970.rounded(.down)))
    }
}

/// RFC 7519 §4.1.3 `aud`: one string or an array of strings.
struct Audience: Codable, Sendable {
    var value: [String]

    init(_ value: [String]) {
        self.value = value
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let single = try? container.decode(String.self) {
            value = [single]
        } else {
            value = try container.decode([String].self)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if value.count == 1 { try container.encode(value[0]) } else { try container.encode(value) }
    }
}

/// The protected header fields that matter for verification (RFC 7515 §4.1).
struct TokenHeader: Decodable {
    var alg: String
    var kid: String?
    var crit: [String]?
}

/// A JSON Web Key Set (RFC 7517 §5), with the members of EC and RSA public keys this service uses.
struct JSONWebKeySet: Decodable {
    struct Key: Decodable {
        /// `EC` or `RSA` (RFC 7518 §6.1).
        var kty: String
        var alg: String?
        var kid: String?
        /// EC: curve (`P-256`) and coordinates, base64url.
        var crv: String?
        var x: String?
        var y: String?
        /// RSA: modulus and exponent, base64url.
        var n: String?
        var e: String?
    }

    var keys: [Key]
}
