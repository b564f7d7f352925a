import Foundation
import PostgresClient
import Testing

@Suite struct LSNTests {
    @Test func parsesAndPrintsPostgresNotation() throws {
        let lsn = try #require(LSN("16/B374D848"))
        #expect(lsn.rawValue == 0x16_B374_D848)
        #expect(lsn.description == "16/B374D848")
        #expect(LSN("0/0") == .zero)
        #expect(LSN.zero.description == "0/0")
        #expect(LSN("ffffffff/ffffffff")?.rawValue == UInt64.max)
        #expect(LSN(rawValue: UInt64.max).description == "FFFFFFFF/FFFFFFFF")
        #expect(LSN("0/1A")?.description == "0/1A")
    }

    @Test(arguments: ["", "/", "0/", "/0", "0", "0/0/0", "123456789/0", "0/123456789", "g/0", "0/-1", " 0/0", "+1/0"])
    func refusesMalformedText(_ text: String) {
        #expect(LSN(text) == nil)
    }

    @Test func ordersByPosition() throws {
        let low = try #require(LSN("0/FFFFFFFF"))
        let high = try #require(LSN("1/0"))
        #expect(low < high)
        #expect(LSN.zero < low)
        #expect(max(low, high) == high)
        #expect(Set([low, high, LSN(rawValue: low.rawValue)]).count == 2)
    }
}

@Suite struct PostgresTimestampTests {
    @Test func convertsBetweenDatesAndPostgresMicroseconds() {
        let epoch = Date(timeIntervalSince1970: 946_684_800)
        #expect(postgresEpochMicroseconds(from: epoch) == 0)
        #expect(Date(postgresEpochMicroseconds: 0) == epoch)
        #expect(postgresEpochMicroseconds(from: epoch.addingTimeInterval(1.5)) == 1_500_000)
        #expect(Date(postgresEpochMicroseconds: -1_000_000) == epoch.addingTimeInterval(-1))
    }

    @Test func postgresNowFollowsTheWallClock() {
        let before = postgresEpochMicroseconds(from: Date())
        let now = Int64.postgresNow
        let after = postgresEpochMicroseconds(from: Date())
        #expect(before - 1 <= now && now <= after + 1)
    }
}
