/// A request method: a validated RFC 9110 token such as `GET` or a registered extension method.
///
/// Methods are case-sensitive (RFC 9110 §9.1); `get` is a different, valid, extension method.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method token as sent.
    public let rawValue: String

    /// Creates a method from a token; `nil` when `rawValue` is empty or holds a non-token byte.
    public init?(rawValue: String) {
        guard !rawValue.isEmpty, rawValue.utf8.allSatisfy(HTTPSyntax.isTokenByte) else { return nil }
        self.rawValue = rawValue
    }

    private init(known: String) { self.rawValue = known }

    public static let get = HTTPMethod(known: "GET")
    public static let head = HTTPMethod(known: "HEAD")
    public static let post = HTTPMethod(known: "POST")
    public static let put = HTTPMethod(known: "PUT")
    public static let delete = HTTPMethod(known: "DELETE")
    public static let options = HTTPMethod(known: "OPTIONS")
    public static let patch = HTTPMethod(known: "PATCH")

    public var description: String { rawValue }

    /// Maps parsed bytes to a shared constant without allocating for the common methods.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> HTTPMethod? {
        switch bytes.count {
        case 3 where bytes[0] == 0x47 && bytes[1] == 0x45 && bytes[2] == 0x54: return .get
        case 3 where bytes[0] == 0x50 && bytes[1] == 0x55 && bytes[2] == 0x54: return .put
        case 4 where bytes.elementsEqual("POST".utf8): return .post
        case 4 where bytes.elementsEqual("HEAD".utf8): return .head
        case 6 where bytes.elementsEqual("DELETE".utf8): return .delete
        case 5 where bytes.elementsEqual("PATCH".utf8): return .patch
        case 7 where bytes.elementsEqual("OPTIONS".utf8): return .options
        default:
            guard !bytes.isEmpty, bytes.allSatisfy(HTTPSyntax.isTokenByte) else { return nil }
            return HTTPMethod(known: String(decoding: bytes, as: UTF8.self))
        }
    }
}
