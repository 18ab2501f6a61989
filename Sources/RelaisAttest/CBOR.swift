/// A CBOR data item (RFC 8949), as App Attest objects and WebAuthn authenticator data use them:
/// integers, byte and text strings, arrays, maps and the simple values. Tags, floats and
/// indefinite lengths never occur there and are refused rather than half-supported.
public indirect enum CBORValue: Sendable, Equatable {
    case unsigned(UInt64)
    /// The value -1 - n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    /// Entries in the order they were encoded; keys are unique (the decoder refuses duplicates).
    case map([MapEntry])
    case bool(Bool)
    case null
    case undefined

    public struct MapEntry: Sendable, Equatable {
        public let key: CBORValue
        public let value: CBORValue

        public init(key: CBORValue, value: CBORValue) {
            self.key = key
            self.value = value
        }
    }

    /// The value under a text key of a map.
    public subscript(text key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }

    /// The value under an integer key of a map (COSE keys use them).
    public subscript(int key: Int) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        let wanted: CBORValue = key >= 0 ? .unsigned(UInt64(key)) : .negative(UInt64(-1 - key))
        return entries.first { $0.key == wanted }?.value
    }

    public var bytesValue: [UInt8]? {
        if case .bytes(let bytes) = self { return bytes }
        return nil
    }

    public var textValue: String? {
        if case .text(let text) = self { return text }
        return nil
    }

    public var arrayValue: [CBORValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    /// An integer that fits in `Int`.
    public var intValue: Int? {
        switch self {
        case .unsigned(let value): value <= UInt64(Int.max) ? Int(value) : nil
        case .negative(let value): value < UInt64(Int.max) ? -1 - Int(value) : nil
        default: nil
        }
    }
}

/// Why bytes are not the CBOR item expected.
public struct CBORError: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String
    /// The byte offset where decoding stopped.
    public let offset: Int
    public var description: String { "CBOR at byte \(offset): \(reason)" }
}

/// Decodes CBOR from untrusted bytes in one pass. Every length is checked against what remains
/// before anything is allocated, and each array or map entry needs at least one byte of input, so
/// time and memory stay linear in the input whatever the declared lengths say; nesting is bounded.
public struct CBORDecoder {
    public static let maxDepth = 16

    private let bytes: [UInt8]
    private var position: Int

    private init(_ bytes: [UInt8], from position: Int) {
        self.bytes = bytes
        self.position = position
    }

    /// The single item `bytes` holds; trailing bytes are an error.
    public static func decode(_ bytes: [UInt8]) throws(CBORError) -> CBORValue {
        var decoder = CBORDecoder(bytes, from: 0)
        let value = try decoder.item(depth: 0)
        guard decoder.position == bytes.count else { throw decoder.error("\(bytes.count - decoder.position) bytes after the item") }
        return value
    }

    /// The item that starts at `offset` and the offset just after it (authenticator data holds a
    /// COSE key followed by optional extensions).
    public static func decodePrefix(_ bytes: [UInt8], at offset: Int) throws(CBORError) -> (value: CBORValue, end: Int) {
        var decoder = CBORDecoder(bytes, from: offset)
        let value = try decoder.item(depth: 0)
        return (value, decoder.position)
    }

    private func error(_ reason: String) -> CBORError { CBORError(reason: reason, offset: position) }

    private var remaining: Int { bytes.count - position }

    private mutating func byte() throws(CBORError) -> UInt8 {
        guard position < bytes.count else { throw error("unexpected end of input") }
        defer { position += 1 }
        return bytes[position]
    }

    /// The argument of a head: the additional information, or the 1, 2, 4 or 8 bytes after it.
    private mutating func argument(_ info: UInt8) throws(CBORError) -> UInt64 {
        switch info {
        case 0...23: return UInt64(info)
        case 24...27:
            let count = 1 << Int(info - 24)
            guard remaining >= count else { throw error("unexpected end of input") }
            var value: UInt64 = 0
            for _ in 0..<count { value = value << 8 | UInt64(bytes[position]); position += 1 }
            return value
        case 31: throw error("indefinite lengths are not accepted")
        default: throw error("reserved additional information \(info)")
        }
    }

    /// A length that the rest of the input can hold (`unit` bytes at least per element).
    private mutating func length(_ info: UInt8, unit: Int) throws(CBORError) -> Int {
        let declared = try argument(info)
        guard declared <= UInt64(remaining / unit) else { throw error("a length of \(declared) exceeds the \(remaining) bytes left") }
        return Int(declared)
    }

    private mutating func item(depth: Int) throws(CBORError) -> CBORValue {
        guard depth < Self.maxDepth else { throw error("nested deeper than \(Self.maxDepth) levels") }
        let head = try byte()
        let major = head >> 5, info = head & 0x1f
        switch major {
        case 0: return .unsigned(try argument(info))
        case 1: return .negative(try argument(info))
        case 2:
            let count = try length(info, unit: 1)
            position += count
            return .bytes(Array(bytes[position - count..<position]))
        case 3:
            let count = try length(info, unit: 1)
            let start = position
            position += count
            guard let text = String(validating: bytes[start..<start + count], as: UTF8.self) else {
                position = start
                throw error("a text string is not UTF-8")
            }
            return .text(text)
        case 4:
            let count = try length(info, unit: 1)
            var items: [CBORValue] = []
            items.reserveCapacity(count)
            for _ in 0..<count { items.append(try item(depth: depth + 1)) }
            return .array(items)
        case 5:
            let count = try length(info, unit: 2)
            var entries: [CBORValue.MapEntry] = []
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let keyStart = position
                let key = try item(depth: depth + 1)
                switch key {
                case .unsigned, .negative, .text: break
                default:
                    position = keyStart
                    throw error("map keys must be integers or text")
                }
                entries.append(CBORValue.MapEntry(key: key, value: try item(depth: depth + 1)))
            }
            // Duplicate keys make a map mean two things to two readers.
            var seen = Set<String>()
            for entry in entries where !seen.insert(Self.keyIdentity(entry.key)).inserted {
                throw error("a map key appears twice")
            }
            return .map(entries)
        case 6: throw error("tags are not accepted")
        default:
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 23: return .undefined
            default: throw error("floating-point and other simple values are not accepted")
            }
        }
    }

    private static func keyIdentity(_ key: CBORValue) -> String {
        switch key {
        case .unsigned(let value): "u\(value)"
        case .negative(let value): "n\(value)"
        case .text(let text): "t" + text
        default: "?"
        }
    }
}
