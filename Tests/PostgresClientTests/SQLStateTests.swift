import PostgresClient
import Testing

@Suite struct SQLStateTests {
    @Test func classCodesMatchTheirWholeClass() {
        #expect(SQLState.connectionException ~= "08006")
        #expect(SQLState.connectionException ~= "08001")
        #expect(!(SQLState.connectionException ~= "57014"))
        #expect(SQLState.uniqueViolation ~= "23505")
        #expect(!(SQLState.uniqueViolation ~= "23514"))
        #expect(SQLState.integrityConstraintViolation ~= "23514")
        #expect(SQLState("40P01").errorClass == "40")
        #expect(SQLState(rawValue: "40P01") == .deadlockDetected)
        #expect(SQLState.uniqueViolation.description == "23505")
        switch SQLState("08P01") {
        case SQLState.connectionException: break
        default: Issue.record("08P01 should match the connection exception class")
        }
    }

    @Test func catchMatchesAThrownPostgresError() {
        do {
            throw PostgresError(kind: .uniqueViolation, sqlState: .uniqueViolation, message: "duplicate key")
        } catch SQLState.checkViolation {
            Issue.record("matched the wrong code")
        } catch SQLState.uniqueViolation {
            // expected
        } catch {
            Issue.record("did not match: \(error)")
        }
    }

    @Test func errorDescriptionHidesMessageAndDetail() {
        let error = PostgresError(
            kind: .uniqueViolation, sqlState: .uniqueViolation,
            message: "duplicate key value violates unique constraint \"user_profiles_username_key\"",
            detail: "Key (username)=(alice) already exists.", constraint: "user_profiles_username_key",
            statementName: "insert_profile")
        #expect(error.description == "PostgresError.uniqueViolation (SQLSTATE 23505) in statement \"insert_profile\"")
        #expect(!"\(error)".contains("alice"))
        #expect(error.debugDescription.contains("alice"))
        #expect(error.debugDescription.contains("user_profiles_username_key"))
    }

    @Test func unavailableAndRetryableKinds() {
        func error(_ kind: PostgresError.Kind) -> PostgresError { PostgresError(kind: kind, message: "") }
        #expect(error(.connectionUnavailable).isUnavailable)
        #expect(error(.queryCanceled).isUnavailable)
        #expect(error(.lockNotAvailable).isUnavailable)
        #expect(!error(.uniqueViolation).isUnavailable)
        #expect(error(.serializationFailure).isRetryable)
        #expect(error(.deadlockDetected).isRetryable)
        #expect(!error(.queryCanceled).isRetryable)
    }
}
