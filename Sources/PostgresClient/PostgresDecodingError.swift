/// A column that could not be decoded, located by column, index, target type and call site.
///
/// Like ``PostgresError``, its description never includes the column's value.
public struct PostgresDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why decoding failed. Leaf decoders (``PostgresDecodable/init(postgresText:)``) throw these.
    public struct Code: Error, Sendable, Hashable, CustomStringConvertible {
        private enum Base: Hashable { case missingData, typeMismatch, missingColumn, failure }
        private let base: Base

        /// The column is SQL `NULL` but a value was required.
        public static let missingData = Code(base: .missingData)
        /// The text is not a valid value of the target type.
        public static let typeMismatch = Code(base: .typeMismatch)
        /// The row has no column of that name.
        public static let missingColumn = Code(base: .missingColumn)
        /// The decoder threw some other error.
        public static let failure = Code(base: .failure)

        public var description: String { "\(base)" }
    }

    public let code: Code
    /// The column's name.
    public let column: String
    /// The column's index in the row, or `nil` for ``Code/missingColumn``.
    public let index: Int?
    /// The name of the type decoded to, e.g. `"Int"`.
    public let targetType: String
    /// Where `decode` was called (`#fileID`).
    public let file: String
    /// Where `decode` was called (`#line`).
    public let line: Int

    public init(code: Code, column: String, index: Int?, targetType: String, file: String, line: Int) {
        self.code = code
        self.column = column
        self.index = index
        self.targetType = targetType
        self.file = file
        self.line = line
    }

    public var description: String {
        let position = index.map { " (index \($0))" } ?? ""
        return "PostgresDecodingError.\(code): column \"\(column)\"\(position) as \(targetType) at \(file):\(line)"
    }
}
