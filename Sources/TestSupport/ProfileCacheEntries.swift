/// The service's memcached entries as seen from outside, for the test targets that read or plant
/// them directly instead of linking `ProfileService`: the key and the byte format of
/// `CacheEntry` (Sources/ProfileService/Cache/CacheEntry.swift), stated once.
/// `CacheEntryTests` holds this copy and the service's encoder together.
///
/// ```
/// key:     profile-service:v1:<id>
/// profile: 0xA1 'F' <version: UInt32 big-endian> <shape: UInt32 big-endian> <the profile's JSON body>
/// absent:  0xA1 'A' 0x00 0x00 0x00 0x00
/// ```
public enum ProfileCacheEntries {
    public static let keyPrefix = "profile-service:v1:"

    /// The memcached key of profile `id`.
    public static func key(for id: Int64) -> String { keyPrefix + String(id) }

    /// The declared fields' names the migrations ship, in order: the shape of the service's entries.
    public static let standardFields = ["bio", "avatar_url", "location", "website"]

    /// The shape of a profile with these fields (FNV-1a over the names, each followed by `;`).
    public static func shape(of fields: [String]) -> UInt32 {
        var hash: UInt32 = 2_166_136_261
        for byte in fields.flatMap({ Array($0.utf8) + [UInt8(ascii: ";")] }) { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return hash
    }

    /// The ten bytes that start the entry of a profile at `version` (the standard fields' shape).
    public static func header(version: Int32, fields: [String] = standardFields) -> [UInt8] {
        var bytes: [UInt8] = [0xA1, UInt8(ascii: "F")]
        for value in [UInt32(version), shape(of: fields)] {
            bytes += [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) }
        }
        return bytes
    }

    /// A whole profile entry, as the service would store it.
    public static func entry(version: Int32, json: [UInt8]) -> [UInt8] { header(version: version) + json }

    /// The version of a stored profile entry (of any shape); `nil` for a lease or anything else.
    public static func version(of entry: [UInt8]) -> Int32? {
        guard let length = headerLength(of: entry) else { return nil }
        let raw = entry[2..<6].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return raw >= 1 && raw <= UInt32(Int32.max) && entry.count > length ? Int32(raw) : nil
    }

    /// 10 for a profile entry, 6 for one of a release before declared fields.
    private static func headerLength(of entry: [UInt8]) -> Int? {
        guard entry.count > 6, entry[0] == 0xA1 else { return nil }
        switch entry[1] {
        case UInt8(ascii: "F"): return 10
        case UInt8(ascii: "P"): return 6
        default: return nil
        }
    }

    /// Whether an entry is the service's record that the profile does not exist.
    public static func isAbsent(_ entry: [UInt8]) -> Bool { entry == [0xA1, UInt8(ascii: "A"), 0, 0, 0, 0] }

    /// The JSON body of a stored profile entry; `nil` for a lease or anything else.
    public static func json(of entry: [UInt8]) -> [UInt8]? {
        guard version(of: entry) != nil, let length = headerLength(of: entry) else { return nil }
        return Array(entry.dropFirst(length))
    }
}
