import Foundation
import ProfileServiceTesting
import TestSupport
import Testing

@testable import ProfileService

/// The cache protocol's scenarios that the unit tests run in memory (CacheProtocolTests), once
/// more on the real PostgreSQL and memcached of scripts/deps.sh: the in-memory cluster must not
/// pass what real memcached would fail.
@Suite(.serialized, .requires(.postgres, .memcached)) struct RealServerCacheProtocolTests {
    @Test func lateReaderDoesNotOverwriteTheWritersVersion() throws {
        try CacheProtocolScenarios.lateReaderDoesNotOverwriteTheWritersVersion(IntegrationBackends.self)
    }

    @Test func aHerdOfReadsSharesOnePostgreSQLRead() throws {
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: { _ in usleep(20_000) }))
        try CacheProtocolScenarios.expectAHerdSharesOneRead(IntegrationBackends.self, shared)
    }

    @Test func aListsLateLoadDoesNotOverwriteTheWritersVersion() throws {
        try CacheProtocolScenarios.aListsLateLoadDoesNotOverwriteTheWritersVersion(IntegrationBackends.self)
    }

    @Test func aLoadTogethersLatePopulateDoesNotOverwriteTheWritersVersion() throws {
        try CacheProtocolScenarios.aLoadTogethersLatePopulateDoesNotOverwriteTheWritersVersion(IntegrationBackends.self)
    }

    @Test func writesMadeTogetherAnswerEachAsAlone() throws {
        try CacheProtocolScenarios.writesMadeTogetherAnswerEachAsAlone(IntegrationBackends.self)
    }

    @Test func aReadFromBeforeADeletionDoesNotBringTheProfileBack() throws {
        try CacheProtocolScenarios.aReadFromBeforeADeletionDoesNotBringTheProfileBack(IntegrationBackends.self)
    }

    @Test func aLateReaderDoesNotOverwriteAVersionWrittenTogether() throws {
        try CacheProtocolScenarios.aLateReaderDoesNotOverwriteAVersionWrittenTogether(IntegrationBackends.self)
    }

    @Test func aReaderPastAnotherReadersLeaseLeavesNoOlderPopulateBehind() throws {
        try CacheProtocolScenarios.aReaderPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(IntegrationBackends.self)
    }

    @Test func aLoadWhosePopulateLostLeavesNoOlderPopulateBehind() throws {
        try CacheProtocolScenarios.aLoadWhosePopulateLostLeavesNoOlderPopulateBehind(IntegrationBackends.self)
    }

    @Test func aLoadTogetherPastAnotherReadersLeaseLeavesNoOlderPopulateBehind() throws {
        try CacheProtocolScenarios.aLoadTogetherPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(IntegrationBackends.self)
    }
}
