@testable import PostgresClient
import Testing

@Suite struct PostgresRowTests {
    let row = PostgresRow(
        columnNames: ["id", "username", "bio", "active", "ratio"], values: ["42", "alice", nil, "t", "0.5"])

    @Test func decodesTextValues() throws {
        #expect(try row.decode("id", as: Int.self) == 42)
        #expect(try row.decode("id", as: Int64.self) == 42)
        #expect(try row.decode("id", as: Int32.self) == 42)
        #expect(try row.decode("username", as: String.self) == "alice")
        #expect(try row.decode("active", as: Bool.self))
        #expect(try row.decode("ratio", as: Double.self) == 0.5)
        #expect(try row.decodeIfPresent("bio", as: String.self) == nil)
        #expect(try row.decodeIfPresent("username", as: String.self) == "alice")
    }

    @Test func typeMismatchNamesTheColumnButNotTheValue() {
        let error = #expect(throws: PostgresDecodingError.self) { try row.decode("username", as: Int.self) }
        #expect(error?.code == .typeMismatch)
        #expect(error?.column == "username")
        #expect(error?.index == 1)
        #expect(error?.targetType == "Int")
        #expect(error?.file == #fileID)
        #expect(error?.line != 0)
        #expect(error.map { !"\($0)".contains("alice") } == true)
    }

    @Test func nullIsMissingData() {
        let error = #expect(throws: PostgresDecodingError.self) { try row.decode("bio", as: String.self) }
        #expect(error?.code == .missingData)
        #expect(error?.column == "bio")
        #expect(error?.index == 2)
    }

    @Test func unknownColumnIsMissingColumn() {
        let error = #expect(throws: PostgresDecodingError.self) { try row.decodeIfPresent("nope", as: String.self) }
        #expect(error?.code == .missingColumn)
        #expect(error?.column == "nope")
        #expect(error?.index == nil)
    }

    @Test func leafDecodersAndEncoders() throws {
        #expect(try Bool(postgresText: "f") == false)
        #expect(throws: PostgresDecodingError.Code.typeMismatch) { try Bool(postgresText: "yes") }
        #expect(throws: PostgresDecodingError.Code.typeMismatch) { try Int32(postgresText: "99999999999") }
        #expect(true.postgresText == "t")
        #expect(Int64.min.postgresText == "-9223372036854775808")
        #expect(Double.infinity.postgresText == "Infinity")
    }
}
