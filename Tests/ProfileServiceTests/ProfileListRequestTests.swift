import Testing

@testable import ProfileService

/// The `ids` of a list: order, floors, repetitions, and what is refused (with the detail a client sees).
@Suite struct ProfileListRequestTests {
    typealias Member = ProfileListRequest.Member

    @Test(arguments: [
        ("3,1,2", [Member(id: 3), Member(id: 1), Member(id: 2)]),
        ("3@7,1,2@4", [Member(id: 3, floor: 7), Member(id: 1), Member(id: 2, floor: 4)]),
        ("5,5,5", [Member(id: 5)]),
        ("5@2,6,5@9,5", [Member(id: 5, floor: 9), Member(id: 6)]),
        ("9223372036854775807@2147483647", [Member(id: .max, floor: .max)]),
    ])
    func accepted(ids: String, members: [Member]) throws {
        #expect(try ProfileListRequest(ids: ids).members == members)
    }

    @Test(arguments: [
        ("", "at least one"),
        ("1,,2", "positive 64-bit integer"),
        ("1,2,", "positive 64-bit integer"),
        ("0", "positive 64-bit integer"),
        ("01", "positive 64-bit integer"),
        ("-1", "positive 64-bit integer"),
        ("9223372036854775808", "positive 64-bit integer"),
        (" 1", "positive 64-bit integer"),
        ("1@", "floor"),
        ("1@0", "floor"),
        ("1@2147483648", "floor"),
        ("1@2@3", "floor"),
        ("a@1", "positive 64-bit integer"),
    ])
    func refused(ids: String, detail: String) {
        #expect {
            try ProfileListRequest(ids: ids)
        } throws: { error in
            (error as? ProfileListRequest.InvalidList)?.description.contains(detail) == true
        }
    }

    @Test func atMostOneHundredIDsRepetitionsIncluded() throws {
        let hundred = (1...100).map(String.init).joined(separator: ",")
        #expect(try ProfileListRequest(ids: hundred).members.count == 100)
        #expect(throws: ProfileListRequest.InvalidList.self) { try ProfileListRequest(ids: hundred + ",1") }
        #expect(throws: ProfileListRequest.InvalidList.self) {
            try ProfileListRequest(ids: Array(repeating: "7", count: 101).joined(separator: ","))
        }
    }

    @Test func theTagNamesTheVersionsAndTheirOrder() {
        func tag(_ pairs: [(Int64, Int32)]) -> String {
            var tag = ListEntityTag()
            for (id, version) in pairs { tag.add(id: id, version: version) }
            return tag.value
        }
        let base = tag([(1, 3), (2, 5)])
        #expect(base == tag([(1, 3), (2, 5)]))
        #expect(base != tag([(1, 3), (2, 6)]), "a member's new version")
        #expect(base != tag([(2, 5), (1, 3)]), "another order")
        #expect(base != tag([(1, 3), (2, 0)]), "a member gone")
        #expect(base.hasPrefix("\"L") && base.hasSuffix("\"") && base.count == 35)
    }
}
