/// The members of `GET /users/profiles?ids=3@7,1,2`: profile ids in the order asked, each with
/// the floor its answer must not go below (`id@version`, as `min_version` for one profile).
///
/// A repeated id is answered once, at the first place it appears, with the highest floor any of
/// its mentions gives. Ids and versions are canonical positive decimals, as everywhere in the API.
public struct ProfileListRequest: Equatable, Sendable {
    public struct Member: Equatable, Sendable {
        public var id: Int64
        public var floor: Int32?

        public init(id: Int64, floor: Int32? = nil) {
            self.id = id
            self.floor = floor
        }
    }

    /// The most ids one list may name (repetitions included).
    public static let maximumIDs = 100
    /// The most ids one list's event stream may name (`GET /users/profiles/events`).
    public static let maximumStreamIDs = 1_000

    public private(set) var members: [Member]

    /// Why an `ids` value is refused; `description` is the problem document's detail.
    public struct InvalidList: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Parses the value of `ids` (already percent-decoded), byte by byte: a list of 100 is parsed
    /// on every request, and `Character` iteration was a tenth of a cached list's CPU.
    public init(ids text: String, maximumIDs: Int = Self.maximumIDs) throws(InvalidList) {
        var text = text
        let parsed = text.withUTF8 { bytes in
            Result { () throws(InvalidList) in try Self.parse(bytes, maximumIDs: maximumIDs) }
        }
        self.members = try parsed.get()
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>, maximumIDs: Int) throws(InvalidList) -> [Member] {
        guard !bytes.isEmpty else { throw InvalidList(description: "ids must name at least one profile id") }
        let entries = bytes.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        guard entries.count <= maximumIDs else {
            throw InvalidList(description: "ids names \(entries.count) profiles; at most \(maximumIDs) are allowed")
        }
        var members: [Member] = []
        var position: [Int64: Int] = [:]
        members.reserveCapacity(entries.count)
        position.reserveCapacity(entries.count)
        for entry in entries {
            let at = entry.firstIndex(of: UInt8(ascii: "@"))
            guard let id = canonicalPositive(entry[..<(at ?? entry.endIndex)], as: Int64.self) else {
                throw InvalidList(
                    description: "each id must be a positive 64-bit integer, optionally with @version: \"\(quoted(entry))\"")
            }
            var floor: Int32?
            if let at {
                guard let version = canonicalPositive(entry[(at + 1)...], as: Int32.self) else {
                    throw InvalidList(description: "a floor must be a version from 1 to 2147483647: \"\(quoted(entry))\"")
                }
                floor = version
            }
            Self.add(Member(id: id, floor: floor), to: &members, position: &position)
        }
        return members
    }

    /// Adds one mention of an id: a repeated id keeps its first place and the highest floor of
    /// its mentions. `position` maps each id of `members` to its index.
    private static func add(_ mention: Member, to members: inout [Member], position: inout [Int64: Int]) {
        if let index = position[mention.id] {
            if let floor = mention.floor { members[index].floor = max(members[index].floor ?? 0, floor) }
        } else {
            position[mention.id] = members.count
            members.append(mention)
        }
    }

    /// The members of several mentions, merged as a list's are: each id once, at its first place,
    /// with the highest floor given (reads loaded together, say).
    public init(mentions: [Member]) {
        var members: [Member] = []
        var position: [Int64: Int] = [:]
        for mention in mentions { Self.add(mention, to: &members, position: &position) }
        self.members = members
    }

    /// At most 40 bytes of what was sent, for the detail.
    private static func quoted(_ entry: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        String(decoding: entry.prefix(40), as: UTF8.self)
    }

    public init(members: [Member]) {
        self.members = members
    }
}
