/// What the service stores under a profile's memcached key.
///
/// The format carries its own format number in the first byte, so a later release can change
/// it without a cache migration: an entry that does not decode is a miss and gets replaced.
///
/// ```
/// profile: 0xA1 'F' <version: UInt32 big-endian> <shape: UInt32 big-endian> <the profile's JSON body>
///          0xA1 'O' <version> <shape> <public view's length: UInt32 big-endian> <public view> <owner-only members>
/// lease:   0xA1 'L' <token: UInt64 big-endian>
/// absent:  0xA1 'A' 0x00 0x00 0x00 0x00
/// handle:  0xA1 'H' <profile id: UInt64 big-endian> <reserved until: UInt64 big-endian, ms since 1970; 0: held>
/// ```
/// A handle's key holds a handle entry, a record of absence (no one holds or keeps the handle)
/// or a lease (docs/design.md §12).
/// A hit answers with the stored JSON bytes as they are: no decode, no re-encode. The shape
/// names the profile's declared fields (``ProfileFields/shape``): a reader takes an entry only in
/// the shape its own declarations give, so during a rolling restart that adds a field no
/// instance serves another's shape — to each, the other's entries are undecodable, which every
/// step of the protocol already treats safely (replaced from PostgreSQL, or deleted). Entries of
/// releases before declared fields (`'P'`, no shape) are read as the shape of no fields. A profile
/// with owner-only fields is `'O'`: its public view, complete, then the members only its owner
/// reads (``ProfileJSON``, docs/design.md §13.2); without them it is `'F'`, byte for byte as before.
enum CacheEntry: Equatable {
    /// `json` is the public view as stored, `ownerMembers` what the owner's view adds (empty when no
    /// field is owner-only).
    case profile(version: Int32, json: ArraySlice<UInt8>, ownerMembers: ArraySlice<UInt8>)
    /// A reader's placeholder while it reads PostgreSQL (docs/design.md §2.1).
    case lease(token: UInt64)
    /// No such profile: PostgreSQL had no row when a reader looked under its lease (docs/design.md
    /// §2.6). Answered 404 from memcached; it counts as version 0 — older than any row — so a
    /// creation's write-through, the change feed's repair and any `min_version` go past it.
    case absent
    /// Under a handle's key: the profile that holds the handle (`reservedUntil` 0), or for whom it
    /// is kept until that time in milliseconds since 1970 (docs/design.md §12). A hint: a lookup
    /// answers a profile only if the profile itself carries the handle.
    case handle(id: Int64, reservedUntil: Int64)

    static let formatMarker: UInt8 = 0xA1
    private static let profileKind = UInt8(ascii: "F")
    private static let profileWithOwnerMembersKind = UInt8(ascii: "O")
    /// A profile entry of a release before declared fields: no shape, the JSON after the version.
    private static let fieldlessProfileKind = UInt8(ascii: "P")
    private static let fieldlessShape = ProfileFields().shape
    private static let leaseKind = UInt8(ascii: "L")
    private static let absentKind = UInt8(ascii: "A")
    private static let handleKind = UInt8(ascii: "H")

    /// Decodes a stored value; `nil` for anything this release does not understand, and for a
    /// profile of another shape than `shape` (the reader's declarations, ``ProfileFieldCatalog/shape``).
    init?(decoding bytes: [UInt8], shape: UInt32) {
        guard bytes.count >= 6, bytes[0] == Self.formatMarker else { return nil }
        switch bytes[1] {
        case Self.profileKind:
            let raw = Self.uint32(bytes, at: 2)
            guard raw >= 1, raw <= UInt32(Int32.max), bytes.count > 10, Self.uint32(bytes, at: 6) == shape else { return nil }
            self = .profile(version: Int32(raw), json: bytes[10...], ownerMembers: [])
        case Self.profileWithOwnerMembersKind:
            let raw = Self.uint32(bytes, at: 2)
            guard raw >= 1, raw <= UInt32(Int32.max), bytes.count > 14, Self.uint32(bytes, at: 6) == shape else { return nil }
            let publicEnd = 14 + Int(Self.uint32(bytes, at: 10))
            guard publicEnd < bytes.count else { return nil }  // owner members follow: never none
            self = .profile(version: Int32(raw), json: bytes[14..<publicEnd], ownerMembers: bytes[publicEnd...])
        case Self.fieldlessProfileKind:
            let raw = Self.uint32(bytes, at: 2)
            guard raw >= 1, raw <= UInt32(Int32.max), bytes.count > 6, shape == Self.fieldlessShape else { return nil }
            self = .profile(version: Int32(raw), json: bytes[6...], ownerMembers: [])
        case Self.absentKind:
            guard bytes.count == 6, bytes[2..<6].allSatisfy({ $0 == 0 }) else { return nil }
            self = .absent
        case Self.handleKind:
            guard bytes.count == 18 else { return nil }
            let id = Int64(bitPattern: Self.uint64(bytes, at: 2))
            let until = Int64(bitPattern: Self.uint64(bytes, at: 10))
            guard id > 0, until >= 0 else { return nil }
            self = .handle(id: id, reservedUntil: until)
        case Self.leaseKind:
            guard bytes.count == 10 else { return nil }
            self = .lease(token: bytes[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        default:
            return nil
        }
    }

    static func encode(_ profile: Profile) -> [UInt8] {
        let json = profile.json
        var header = [UInt32(profile.version), profile.fields.shape]
        if json.hasOwnerView { header.append(UInt32(json.publicView.count)) }
        var bytes = [formatMarker, json.hasOwnerView ? profileWithOwnerMembersKind : profileKind]
        bytes.reserveCapacity(2 + 4 * header.count + json.publicView.count + json.ownerMembers.count)
        for value in header {
            bytes.append(contentsOf: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) })
        }
        bytes.append(contentsOf: json.publicView)
        bytes.append(contentsOf: json.ownerMembers)
        return bytes
    }

    static func encodeHandle(id: Int64, reservedUntil: Int64) -> [UInt8] {
        [formatMarker, handleKind] + [UInt64(bitPattern: id), UInt64(bitPattern: reservedUntil)].flatMap { value in
            stride(from: 56, through: 0, by: -8).map { UInt8(truncatingIfNeeded: value >> $0) }
        }
    }

    private static func uint64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        bytes[offset..<offset + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    static let encodedAbsent: [UInt8] = [formatMarker, absentKind, 0, 0, 0, 0]

    /// The version an entry stands for: a profile's, 0 for ``absent``, nil for a lease (and a
    /// handle, which is never under a profile's key).
    var version: Int32? {
        switch self {
        case .profile(let version, _, _): version
        case .absent: 0
        case .lease, .handle: nil
        }
    }

    /// The token of the lease `bytes` hold; nil when they hold anything else.
    static func leaseToken(in bytes: [UInt8]) -> UInt64? {
        guard bytes.count == 10, bytes[0] == formatMarker, bytes[1] == leaseKind else { return nil }
        return bytes[2..<10].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    static func encodeLease(token: UInt64) -> [UInt8] {
        [formatMarker, leaseKind] + stride(from: 56, through: 0, by: -8).map { UInt8(truncatingIfNeeded: token >> $0) }
    }
}
