/// The service's memcached entries as seen from outside, for the test targets that read or plant
/// them directly instead of linking `ProfileService`: the key and the byte format of
/// `CacheEntry` (Sources/ProfileService/Cache/CacheEntry.swift), stated once.
/// `CacheEntryTests` holds this copy and the service's encoder together.
///
/// ```
/// key:     profile-service:v1:<id>
/// profile: 0xA1 'P' <version: UInt32 big-endian> <the profile's JSON body>
/// absent:  0xA1 'A' 0x00 0x00 0x00 0x00
/// ```
public enum ProfileCacheEntries {
    public static let keyPrefix = "profile-service:v1:"

    /// The memcached key of profile `id`.
    public static func key(for id: Int64) -> String { keyPrefix + String(id) }

    /// The six bytes that start the entry of a profile at `version`.
    public static func header(version: Int32) -> [UInt8] {
        let raw = UInt32(version)
        return [0xA1, UInt8(ascii: "P")] + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: raw >> $0) }
    }

    /// A whole profile entry, as the service would store it.
    public static func entry(version: Int32, json: [UInt8]) -> [UInt8] { header(version: version) + json }

    /// The version of a stored profile entry; `nil` for a lease or anything else.
    public static func version(of entry: [UInt8]) -> Int32? {
        guard entry.count > 6, entry[0] == 0xA1, entry[1] == UInt8(ascii: "P") else { return nil }
        let raw = entry[2..<6].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return raw >= 1 && raw <= UInt32(Int32.max) ? Int32(raw) : nil
    }

    /// Whether an entry is the service's record that the profile does not exist.
    public static func isAbsent(_ entry: [UInt8]) -> Bool { entry == [0xA1, UInt8(ascii: "A"), 0, 0, 0, 0] }

    /// The JSON body of a stored profile entry; `nil` for a lease or anything else.
    public static func json(of entry: [UInt8]) -> [UInt8]? {
        version(of: entry) == nil ? nil : Array(entry.dropFirst(6))
    }
}
