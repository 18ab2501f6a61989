import RelaisCrypto

/// A JSON object kept as its text, with where each member sits: a token header or claims set is
/// checked against the full grammar once (duplicates refused), and a member nobody reads costs no
/// allocation. Values are decoded on demand, one member at a time.
struct JSONObjectView: Sendable, Equatable {
    /// Where each member of the object sits in its text. Names are compared as bytes (JSON compares
    /// member names by code points, without normalization); escaped names by their decoded bytes.
    /// A token's members are few, so a linear scan beats hashing every name; past
    /// ``hashedFrom`` members the duplicate check hashes, so that a crafted header of thousands of
    /// members costs linear time, not quadratic.
    struct Members: Sendable, Equatable {
        struct Entry: Sendable, Equatable {
            var name: Range<Int>
            var value: Range<Int>
            /// Index in `decodedNames` when the name holds escapes, else -1. Keeps `Entry` trivial.
            var decodedName: Int
        }

        private(set) var entries: [Entry] = []
        private(set) var decodedNames: [[UInt8]] = []
        /// Every name so far, once there are ``hashedFrom`` of them.
        private var names: Set<[UInt8]>?
        static let hashedFrom = 32

        init() { entries.reserveCapacity(16) }

        /// Adds a member; false when the name is already present (a duplicate).
        mutating func append(name: Range<Int>, decodedName: [UInt8]?, value: Range<Int>, in buffer: UnsafeBufferPointer<UInt8>) -> Bool {
            if entries.count == Self.hashedFrom { names = Set(entries.map { bytes(of: $0, in: buffer) }) }
            if names != nil {
                guard names!.insert(decodedName ?? Array(buffer[name])).inserted else { return false }
            } else {
                let duplicate: Bool =
                    if let decodedName {
                        decodedName.withUnsafeBufferPointer { contains(name: $0, in: buffer) }
                    } else {
                        contains(name: UnsafeBufferPointer(rebasing: buffer[name]), in: buffer)
                    }
                if duplicate { return false }
            }
            var index = -1
            if let decodedName {
                index = decodedNames.count
                decodedNames.append(decodedName)
            }
            entries.append(Entry(name: name, value: value, decodedName: index))
            return true
        }

        /// The first entry named `wanted`.
        func first(named wanted: UnsafeBufferPointer<UInt8>, in buffer: UnsafeBufferPointer<UInt8>) -> Entry? {
            entries.first { entry in
                if entry.decodedName >= 0 { return decodedNames[entry.decodedName].elementsEqual(wanted) }
                return entry.name.count == wanted.count && UnsafeBufferPointer(rebasing: buffer[entry.name]).elementsEqual(wanted)
            }
        }

        /// An entry's name as bytes: decoded when it holds escapes.
        private func bytes(of entry: Entry, in buffer: UnsafeBufferPointer<UInt8>) -> [UInt8] {
            entry.decodedName >= 0 ? decodedNames[entry.decodedName] : Array(buffer[entry.name])
        }

        private func contains(name: UnsafeBufferPointer<UInt8>, in buffer: UnsafeBufferPointer<UInt8>) -> Bool {
            first(named: name, in: buffer) != nil
        }

        /// The name as JSON means it: the raw text, or the decoded form when escaped.
        func name(of entry: Entry, in buffer: UnsafeBufferPointer<UInt8>) -> String {
            if entry.decodedName >= 0 { return String(decoding: decodedNames[entry.decodedName], as: UTF8.self) }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[entry.name]), as: UTF8.self)
        }
    }

    let bytes: [UInt8]
    private let members: Members

    /// Nil unless `bytes` is exactly one JSON object.
    init?(_ bytes: [UInt8]) {
        guard let members = JSONParser.index(bytes) else { return nil }
        self.bytes = bytes
        self.members = members
    }

    /// The decoded value of member `name`, nil when absent.
    subscript(_ name: String) -> JSONValue? {
        valueRange(of: name).flatMap { JSONParser.parse(bytes, range: $0) }
    }

    /// Compares a string member with `expected` on the bytes, without building a String (escaped
    /// values are decoded first). `constantTime` for secrets such as a nonce.
    func compareString(_ name: String, to expected: String, constantTime: Bool = false) -> StringComparison {
        guard let range = valueRange(of: name) else { return .missing }
        return bytes.withUnsafeBufferPointer { buffer in
            guard buffer[range.lowerBound] == UInt8(ascii: "\"") else { return .notString }
            let inner = UnsafeBufferPointer(rebasing: buffer[(range.lowerBound + 1)..<(range.upperBound - 1)])
            var expected = expected
            return expected.withUTF8 { wanted in
                if inner.contains(UInt8(ascii: "\\")) {
                    guard var decoded = JSONParser.decodeString(buffer, range: range) else { return .notString }
                    return decoded.withUTF8 { Self.equal(UnsafeRawBufferPointer($0), UnsafeRawBufferPointer(wanted), constantTime) } ? .equal : .different
                }
                return Self.equal(UnsafeRawBufferPointer(inner), UnsafeRawBufferPointer(wanted), constantTime) ? .equal : .different
            }
        }
    }

    /// Every member, decoded.
    var dictionary: [String: JSONValue] {
        var result: [String: JSONValue] = [:]
        for entry in members.entries { result[name(of: entry)] = JSONParser.parse(bytes, range: entry.value) }
        return result
    }

    var names: [String] { members.entries.map(name(of:)) }

    private func name(of entry: Members.Entry) -> String {
        bytes.withUnsafeBufferPointer { members.name(of: entry, in: $0) }
    }

    private func valueRange(of name: String) -> Range<Int>? {
        var name = name
        return name.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { buffer in
                members.first(named: wanted, in: buffer)?.value
            }
        }
    }

    private static func equal(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer, _ constantTime: Bool) -> Bool {
        constantTime ? ConstantTime.equals(lhs, rhs) : lhs.elementsEqual(rhs)
    }

    static func == (lhs: JSONObjectView, rhs: JSONObjectView) -> Bool { lhs.dictionary == rhs.dictionary }
}

/// The outcome of ``JSONObjectView/compareString(_:to:constantTime:)``.
enum StringComparison {
    case missing, notString, equal, different
}
