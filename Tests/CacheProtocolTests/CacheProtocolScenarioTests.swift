import Foundation
import ProfileServiceTesting
import Testing

@testable import ProfileService

/// Every forced interleaving of the cache protocol (docs/design.md §2.1, §2.2, §2.9), each with
/// its profile read or written alone and in a batch with others, in memory; the same scenarios
/// run on the real servers in RealServerCacheProtocolTests.
@Suite struct CacheProtocolScenarioTests {
    @Test(arguments: Batching.allCases) func aHerdOfReadsSharesOnePostgreSQLRead(_ batching: Batching) throws {
        // Slow the leader's read so that the others arrive while it is in flight.
        let shared = ProfileCacheShared(hooks: .init(afterDatabaseRead: { _ in usleep(50_000) }))
        try CacheProtocolScenarios.expectAHerdSharesOneRead(InMemoryBackends.self, shared, batching)
    }

    @Test(arguments: Batching.allCases) func lateReaderDoesNotOverwriteTheWritersVersion(_ batching: Batching) throws {
        try CacheProtocolScenarios.lateReaderDoesNotOverwriteTheWritersVersion(InMemoryBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLoadTogethersLatePopulateDoesNotOverwriteTheWritersVersion(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLoadTogethersLatePopulateDoesNotOverwriteTheWritersVersion(InMemoryBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func writesMadeTogetherAnswerEachAsAlone(_ batching: Batching) throws {
        try CacheProtocolScenarios.writesMadeTogetherAnswerEachAsAlone(InMemoryBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLateReaderDoesNotOverwriteAVersionWrittenTogether(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLateReaderDoesNotOverwriteAVersionWrittenTogether(InMemoryBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aReadFromBeforeADeletionDoesNotBringTheProfileBack(_ batching: Batching) throws {
        try CacheProtocolScenarios.aReadFromBeforeADeletionDoesNotBringTheProfileBack(InMemoryBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aReaderPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(_ batching: Batching) throws {
        try CacheProtocolScenarios.aReaderPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(InMemoryBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLoadWhosePopulateLostLeavesNoOlderPopulateBehind(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLoadWhosePopulateLostLeavesNoOlderPopulateBehind(InMemoryBackends.self, batching)
    }

    @Test(arguments: Batching.allCases) func aLoadTogetherPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(_ batching: Batching) throws {
        try CacheProtocolScenarios.aLoadTogetherPastAnotherReadersLeaseLeavesNoOlderPopulateBehind(InMemoryBackends.self, batching)
    }
}
