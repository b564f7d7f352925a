/// A request that breaks HTTP/1.1 framing or a limit; carries the status to answer before closing.
///
/// Compare ``code`` in tests, not ``detail``.
public struct HTTPParserError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which rule was broken. An open set of named constants.
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let bareCR = Code(rawValue: "bareCR")
        public static let bareLF = Code(rawValue: "bareLF")
        public static let invalidRequestLine = Code(rawValue: "invalidRequestLine")
        public static let invalidMethod = Code(rawValue: "invalidMethod")
        public static let invalidTarget = Code(rawValue: "invalidTarget")
        public static let invalidVersion = Code(rawValue: "invalidVersion")
        public static let unsupportedVersion = Code(rawValue: "unsupportedVersion")
        public static let requestLineTooLong = Code(rawValue: "requestLineTooLong")
        public static let headerBlockTooLarge = Code(rawValue: "headerBlockTooLarge")
        public static let tooManyHeaders = Code(rawValue: "tooManyHeaders")
        public static let obsoleteLineFolding = Code(rawValue: "obsoleteLineFolding")
        public static let whitespaceBeforeColon = Code(rawValue: "whitespaceBeforeColon")
        public static let missingColon = Code(rawValue: "missingColon")
        public static let invalidHeaderName = Code(rawValue: "invalidHeaderName")
        public static let invalidHeaderValue = Code(rawValue: "invalidHeaderValue")
        public static let missingHost = Code(rawValue: "missingHost")
        public static let duplicateHost = Code(rawValue: "duplicateHost")
        public static let contentLengthWithTransferEncoding = Code(rawValue: "contentLengthWithTransferEncoding")
        public static let duplicateContentLength = Code(rawValue: "duplicateContentLength")
        public static let invalidContentLength = Code(rawValue: "invalidContentLength")
        public static let unsupportedTransferEncoding = Code(rawValue: "unsupportedTransferEncoding")
        public static let invalidTransferEncoding = Code(rawValue: "invalidTransferEncoding")
        public static let invalidChunkSize = Code(rawValue: "invalidChunkSize")
        public static let invalidChunkTerminator = Code(rawValue: "invalidChunkTerminator")
        public static let bodyTooLarge = Code(rawValue: "bodyTooLarge")
        public static let trailersTooLarge = Code(rawValue: "trailersTooLarge")
    }

    public let code: Code
    /// The status to answer with (400, 413, 414, 431, 501 or 505).
    public let status: HTTPStatus
    /// Short human text for the problem document's `detail`.
    public let detail: String

    public init(code: Code, status: HTTPStatus, detail: String) {
        self.code = code
        self.status = status
        self.detail = detail
    }

    public var description: String { "HTTPParserError(\(code.rawValue), \(status.code)): \(detail)" }

    static func badRequest(_ code: Code, _ detail: String) -> HTTPParserError {
        HTTPParserError(code: code, status: .badRequest, detail: detail)
    }
}
