import Testing

@testable import PostgresClient

/// pgoutput messages built byte by byte as PostgreSQL 15's proto.c writes them.
@Suite struct PgOutputDecoderTests {
    @Test func begin() throws {
        let bytes = Bytes("B").int64(0x1_0000_00A0).int64(777_000_000).int32(4242)
        #expect(
            try PgOutputDecoder.decode(bytes.value)
                == .begin(finalLSN: LSN(rawValue: 0x1_0000_00A0), commitTime: 777_000_000, xid: 4242))
    }

    @Test func commit() throws {
        let bytes = Bytes("C").int8(0).int64(0x20).int64(0x48).int64(-5)
        #expect(
            try PgOutputDecoder.decode(bytes.value)
                == .commit(commitLSN: LSN(rawValue: 0x20), endLSN: LSN(rawValue: 0x48), commitTime: -5))
    }

    @Test func relation() throws {
        #expect(
            try PgOutputDecoder.decode(Self.relationBytes)
                == .relation(
                    PgOutputRelation(
                        id: 16385, namespace: "public", name: "user_profiles",
                        columns: [
                            .init(name: "id", typeOID: 20, isKey: true),
                            .init(name: "display_name", typeOID: 25, isKey: false),
                        ])))
    }

    @Test func insertWithTextNullAndUnchangedToast() throws {
        let bytes = Bytes("I").int32(16385).byte("N").int16(4).text("42").byte("n").byte("u").text("Ada Lovelace ✓")
        #expect(
            try PgOutputDecoder.decode(bytes.value)
                == .insert(relationID: 16385, new: [.text("42"), .null, .unchangedToast, .text("Ada Lovelace ✓")]))
    }

    @Test func emptyTextIsNotNull() throws {
        let bytes = Bytes("I").int32(1).byte("N").int16(1).text("")
        #expect(try PgOutputDecoder.decode(bytes.value) == .insert(relationID: 1, new: [.text("")]))
        #expect(PgOutputValue.text("").text == "")
        #expect(PgOutputValue.null.text == nil)
        #expect(PgOutputValue.unchangedToast.text == nil)
    }

    @Test func updateWithoutOldRow() throws {
        let bytes = Bytes("U").int32(7).byte("N").int16(2).text("1").byte("u")
        #expect(
            try PgOutputDecoder.decode(bytes.value)
                == .update(relationID: 7, old: nil, new: [.text("1"), .unchangedToast]))
    }

    @Test(arguments: ["K", "O"])
    func updateWithOldKeyOrRow(_ marker: Character) throws {
        let bytes = Bytes("U").int32(7).byte(marker).int16(2).text("1").byte("n").byte("N").int16(2).text("2").text("b")
        #expect(
            try PgOutputDecoder.decode(bytes.value)
                == .update(relationID: 7, old: [.text("1"), .null], new: [.text("2"), .text("b")]))
    }

    @Test(arguments: ["K", "O"])
    func delete(_ marker: Character) throws {
        let bytes = Bytes("D").int32(9).byte(marker).int16(2).text("5").byte("n")
        #expect(try PgOutputDecoder.decode(bytes.value) == .delete(relationID: 9, old: [.text("5"), .null]))
    }

    @Test func truncate() throws {
        let bytes = Bytes("T").int32(2).int8(1).int32(16385).int32(16390)
        #expect(try PgOutputDecoder.decode(bytes.value) == .truncate(relationIDs: [16385, 16390]))
    }

    @Test(arguments: ["O", "Y", "M", "S", "E", "c", "A", "x"])
    func otherKindsAreNamedNotDecoded(_ kind: Character) throws {
        let bytes = Bytes(kind).int64(1).cString("origin")
        #expect(try PgOutputDecoder.decode(bytes.value) == .other(kind: kind.asciiValue!))
    }

    @Test func ignoresBytesAfterTheKnownFields() throws {
        let bytes = Bytes("B").int64(1).int64(2).int32(3).int32(99)
        #expect(try PgOutputDecoder.decode(bytes.value) == .begin(finalLSN: LSN(rawValue: 1), commitTime: 2, xid: 3))
    }

    /// Every prefix of every well-formed message, from empty to one byte short, is truncated.
    @Test func everyPrefixOfAMessageIsTruncated() throws {
        let insert = Bytes("I").int32(1).byte("N").int16(3).text("abc").byte("n").text("xyz")
        let update = Bytes("U").int32(1).byte("O").int16(1).text("old").byte("N").int16(1).text("new")
        let begin = Bytes("B").int64(1).int64(2).int32(3)
        let commit = Bytes("C").int8(0).int64(1).int64(2).int64(3)
        let delete = Bytes("D").int32(1).byte("K").int16(1).text("k")
        let truncate = Bytes("T").int32(1).int8(0).int32(5)
        for message in [
            insert.value, update.value, begin.value, commit.value, delete.value, truncate.value, Self.relationBytes,
        ] {
            #expect(throws: Never.self) { try PgOutputDecoder.decode(message) }
            for length in 0..<message.count {
                let error = #expect(throws: PgOutputDecodingError.self) {
                    try PgOutputDecoder.decode(Array(message.prefix(length)))
                }
                #expect(error?.reason == .truncated)
                #expect(error?.messageKind == (length == 0 ? nil : message[0]))
            }
        }
    }

    @Test func unknownTupleKindIsAnError() throws {
        let bytes = Bytes("I").int32(1).byte("N").int16(2).byte("n").byte("b").int32(1).int8(0)
        let error = #expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(bytes.value) }
        #expect(error?.reason == .unknownTupleKind(UInt8(ascii: "b")))
        #expect(error?.messageKind == UInt8(ascii: "I"))
        #expect(error?.offset == 9)
    }

    @Test func missingTupleMarkerIsAnError() throws {
        let insert = Bytes("I").int32(1).byte("K").int16(0)
        #expect(
            (#expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(insert.value) })?.reason
                == .unexpectedTupleMarker(UInt8(ascii: "K")))
        let update = Bytes("U").int32(1).byte("K").int16(0).byte("X")
        #expect(
            (#expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(update.value) })?.reason
                == .unexpectedTupleMarker(UInt8(ascii: "X")))
        let delete = Bytes("D").int32(1).byte("N").int16(0)
        #expect(
            (#expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(delete.value) })?.reason
                == .unexpectedTupleMarker(UInt8(ascii: "N")))
    }

    @Test func negativeLengthsAreErrorsNotAllocations() throws {
        let text = Bytes("I").int32(1).byte("N").int16(1).byte("t").int32(-1)
        #expect(
            (#expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(text.value) })?.reason
                == .invalidLength(-1))
        let columns = Bytes("I").int32(1).byte("N").int16(-3)
        #expect(
            (#expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(columns.value) })?.reason
                == .invalidLength(-3))
        let truncate = Bytes("T").int32(-2).int8(0)
        #expect(
            (#expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(truncate.value) })?.reason
                == .invalidLength(-2))
        // A huge length with few bytes behind it is truncated, not a 2 GiB read.
        let huge = Bytes("I").int32(1).byte("N").int16(1).byte("t").int32(Int32.max).int8(65)
        #expect(
            (#expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(huge.value) })?.reason
                == .truncated)
    }

    @Test func errorsDoNotQuoteTheData() throws {
        let bytes = Bytes("I").int32(1).byte("N").int16(2).text("secret-name").byte("?")
        let error = #expect(throws: PgOutputDecodingError.self) { try PgOutputDecoder.decode(bytes.value) }
        #expect(error.map { !"\($0)".contains("secret") } == true)
        #expect(error.map { "\($0)".contains("'I'") } == true)
    }

    /// Random bytes after each message kind: any outcome but a crash.
    @Test func randomBytesNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let kind = Array("BCRIUDTOYM".utf8).randomElement(using: &generator)!
            let tail = (0..<Int.random(in: 0...40, using: &generator)).map { _ in
                // Mostly small values, so that counts and markers are often plausible.
                Bool.random(using: &generator)
                    ? UInt8.random(in: 0...3, using: &generator)
                    : Array("NKOntu".utf8).randomElement(using: &generator)!
            }
            _ = try? PgOutputDecoder.decode([kind] + tail)
        }
    }

    static let relationBytes: [UInt8] =
        Bytes("R").int32(16385).cString("public").cString("user_profiles").byte("d").int16(2)
        .int8(1).cString("id").int32(20).int32(-1)
        .int8(0).cString("display_name").int32(25).int32(-1)
        .value
}

@Suite struct ReplicationMessageTests {
    @Test func walData() throws {
        let bytes = Bytes("w").int64(0x10).int64(0x30).int64(123).byte("B").int8(1)
        #expect(
            ReplicationMessage(copyData: bytes.value)
                == .walData(
                    start: LSN(rawValue: 0x10), walEnd: LSN(rawValue: 0x30), serverTime: 123,
                    payload: [UInt8(ascii: "B"), 1]))
    }

    @Test func keepalive() throws {
        let bytes = Bytes("k").int64(0x1_0000_0000).int64(-7).int8(1)
        #expect(
            ReplicationMessage(copyData: bytes.value)
                == .keepalive(walEnd: LSN(rawValue: 0x1_0000_0000), serverTime: -7, replyRequested: true))
        let noReply = Bytes("k").int64(1).int64(2).int8(0)
        #expect(
            ReplicationMessage(copyData: noReply.value)
                == .keepalive(walEnd: LSN(rawValue: 1), serverTime: 2, replyRequested: false))
    }

    @Test func shortOrUnknownMessagesAreRefused() {
        let keepalive = Bytes("k").int64(1).int64(2).int8(0)
        for length in 0..<keepalive.value.count {
            #expect(ReplicationMessage(copyData: Array(keepalive.value.prefix(length))) == nil)
        }
        let header = Bytes("w").int64(1).int64(2).int64(3)
        #expect(ReplicationMessage(copyData: Array(header.value.dropLast())) == nil)
        #expect(
            ReplicationMessage(copyData: header.value)
                == .walData(start: LSN(rawValue: 1), walEnd: LSN(rawValue: 2), serverTime: 3, payload: []))
        #expect(ReplicationMessage(copyData: [UInt8(ascii: "r")] + Array(repeating: 0, count: 33)) == nil)
    }

    @Test func standbyStatusUpdateLayout() {
        let bytes = ReplicationMessage.standbyStatusUpdate(
            written: LSN(rawValue: 0x0102_0304_0506_0708), flushed: LSN(rawValue: 2), applied: LSN(rawValue: 3),
            clock: -1, replyRequested: true)
        let expected = Bytes("r").int64(0x0102_0304_0506_0708).int64(2).int64(3).int64(-1).int8(1)
        #expect(bytes == expected.value)
        #expect(bytes.count == 34)
    }

    @Test func startReplicationCommandQuotesNames() throws {
        #expect(
            try LogicalReplicationStream.startReplicationCommand(
                slot: "cache_feed", publication: "profile_changes", startLSN: LSN(rawValue: 0x1_0000_0010))
                == #"START_REPLICATION SLOT "cache_feed" LOGICAL 1/10 (proto_version '1', publication_names '"profile_changes"')"#
        )
        #expect(
            try LogicalReplicationStream.startReplicationCommand(
                slot: #"a"b"#, publication: #"it's "x", y"#, startLSN: .zero)
                == #"START_REPLICATION SLOT "a""b" LOGICAL 0/0 (proto_version '1', publication_names '"it''s ""x"", y"')"#
        )
        let error = #expect(throws: PostgresError.self) {
            try LogicalReplicationStream.startReplicationCommand(slot: "a\0b", publication: "p", startLSN: .zero)
        }
        #expect(error?.kind == .invalidConfiguration)
    }
}

/// Builds big-endian wire bytes: `Bytes("B").int64(1).int32(2).value`.
struct Bytes {
    let value: [UInt8]

    init(_ kind: Character) {
        value = [kind.asciiValue!]
    }

    private init(value: [UInt8]) {
        self.value = value
    }

    func byte(_ character: Character) -> Bytes { Bytes(value: value + [character.asciiValue!]) }

    func int8(_ number: UInt8) -> Bytes { Bytes(value: value + [number]) }

    func int16(_ number: Int16) -> Bytes { appending(UInt64(UInt16(bitPattern: number)), count: 2) }

    func int32(_ number: Int32) -> Bytes { appending(UInt64(UInt32(bitPattern: number)), count: 4) }

    func int64(_ number: Int64) -> Bytes { appending(UInt64(bitPattern: number), count: 8) }

    func cString(_ text: String) -> Bytes { Bytes(value: value + Array(text.utf8) + [0]) }

    /// A tuple column: 't', Int32 length, the UTF-8 bytes.
    func text(_ text: String) -> Bytes {
        let header = byte("t").int32(Int32(text.utf8.count))
        return Bytes(value: header.value + Array(text.utf8))
    }

    private func appending(_ number: UInt64, count: Int) -> Bytes {
        Bytes(value: value + (0..<count).reversed().map { UInt8(truncatingIfNeeded: number >> (8 * $0)) })
    }
}
