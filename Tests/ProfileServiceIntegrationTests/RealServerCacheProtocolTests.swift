import Foundation
import ProfileServiceTesting
import TestSupport
import Testing

@testable import ProfileService

/// The cache protocol's scenarios that the unit tests run in memory (CacheProtocolTests), each
/// alone and in a batch with others, once more on the real PostgreSQL and memcached of scripts/deps.sh: the in-memory cluster must not
/// pass what real memcached would fail.
@Suite(.serialized, .requires(.postgres, .memcached)) struct RealServerCacheProtocolTests {
    @Test(arguments: Batching.allCases) func aHerdOfReadsSharesOnePostgreSQLRead(_ batching: Batching) throws {
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: { _ in usleep(20_000) }))
        try CacheProtocolScenarios.expectAHerdSharesOneRead(IntegrationBackends.self, shared, batching)
    }

    @Test(arguments: Batching.allCases) func lateReaderDoesNotOverwriteTheWritersVersion(_ batching: Batching) throws {
        try CacheProtocolScenarios.lateReaderDoesNotOverwriteTheWritersVersion(IntegrationBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLoadTogethersLatePopulateDoesNotOverwriteTheWritersVersion(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLoadTogethersLatePopulateDoesNotOverwriteTheWritersVersion(IntegrationBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func writesMadeTogetherAnswerEachAsAlone(_ batching: Batching) throws {
        try CacheProtocolScenarios.writesMadeTogetherAnswerEachAsAlone(IntegrationBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLateReaderDoesNotOverwriteAVersionWrittenTogether(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLateReaderDoesNotOverwriteAVersionWrittenTogether(IntegrationBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aReadFromBeforeADeletionDoesNotBringTheProfileBack(_ batching: Batching) throws {
        try CacheProtocolScenarios.aReadFromBeforeADeletionDoesNotBringTheProfileBack(IntegrationBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aReaderPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(_ batching: Batching) throws {
        try CacheProtocolScenarios.aReaderPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(IntegrationBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLoadWhosePopulateLostLeavesNoOlderPopulateBehind(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLoadWhosePopulateLostLeavesNoOlderPopulateBehind(IntegrationBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLoadTogetherPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLoadTogetherPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(IntegrationBackends.self, batching)
    }
}
