/// Ordered header fields with case-insensitive lookup; duplicates are kept in order.
///
/// Like NIO's `HTTPHeaders`, a second `Content-Length` stays visible, so framing checks can see it.
///
/// ```swift
/// var headers: HTTPHeaders = ["Content-Type": "application/json"]
/// headers.add(name: "Vary", value: "Accept")
/// headers["content-type"]  // "application/json"
/// ```
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (name: String, value: String)

    var storage: [(name: String, value: String)]

    public init() { storage = [] }

    public init(_ pairs: [(String, String)]) {
        storage = pairs.map { (name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        storage = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of `name`, compared case-insensitively; `nil` when absent.
    public subscript(name: String) -> String? {
        for field in storage where HTTPSyntax.equalsIgnoringCase(field.name, name) { return field.value }
        return nil
    }

    /// Every value of `name`, in order.
    public func values(for name: String) -> [String] {
        storage.filter { HTTPSyntax.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// How many fields are named `name`, without collecting their values.
    public func count(of name: String) -> Int {
        var count = 0
        for field in storage where HTTPSyntax.equalsIgnoringCase(field.name, name) { count += 1 }
        return count
    }

    public func contains(_ name: String) -> Bool {
        storage.contains { HTTPSyntax.equalsIgnoringCase($0.name, name) }
    }

    /// Appends a field, keeping any existing field of the same name.
    public mutating func add(name: String, value: String) {
        storage.append((name: name, value: value))
    }

    /// Replaces the first field named `name` and removes the others, or appends one.
    public mutating func replaceOrAdd(name: String, value: String) {
        if let index = storage.firstIndex(where: { HTTPSyntax.equalsIgnoringCase($0.name, name) }) {
            storage[index].value = value
            var next = index + 1
            while next < storage.count {
                if HTTPSyntax.equalsIgnoringCase(storage[next].name, name) {
                    storage.remove(at: next)
                } else {
                    next += 1
                }
            }
        } else {
            storage.append((name: name, value: value))
        }
    }

    /// Removes every field named `name`.
    public mutating func remove(name: String) {
        storage.removeAll { HTTPSyntax.equalsIgnoringCase($0.name, name) }
    }

    public var count: Int { storage.count }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        storage.makeIterator()
    }
}
