import FoundationEssentials
import RelaisCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A JSON value, for headers and claims whose members are not known in advance.
///
/// Token headers, claims and JWKs are read into this type by a strict parser (``parse(_:)``,
/// ``object(from:)``) rather than `JSONDecoder`: duplicate member names are refused, so a claim
/// cannot say one thing to RelaisJOSE and another to a more lenient parser downstream.
public enum JSONValue: Sendable, Equatable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number. JSON does not distinguish integers; timestamps such as `exp` arrive here as whole numbers.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; member order is not kept (``serialized(pretty:)`` sorts the keys).
    case object([String: JSONValue])

    /// Decodes any JSON value, trying null, bool, number, string, array and object in that order.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value; whole numbers are written without a fraction (`1700000000`, not `1.7e9`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            // Whole numbers (exp, iat) are written without a fraction.
            if value == value.rounded(), abs(value) < 1e15 { try container.encode(Int64(value)) } else { try container.encode(value) }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The string, or nil when the value is not a string (no conversion from numbers or booleans).
    public var stringValue: String? { if case .string(let value) = self { value } else { nil } }
    /// The number, or nil when the value is not a number.
    public var numberValue: Double? { if case .number(let value) = self { value } else { nil } }
    /// The boolean, or nil when the value is not `true` or `false`.
    public var boolValue: Bool? { if case .bool(let value) = self { value } else { nil } }
    /// The members, or nil when the value is not an object.
    public var objectValue: [String: JSONValue]? { if case .object(let value) = self { value } else { nil } }
    /// The elements, or nil when the value is not an array.
    public var arrayValue: [JSONValue]? { if case .array(let value) = self { value } else { nil } }

    /// Parses a JSON object strictly (duplicate member names and trailing data are refused); nil
    /// when the bytes are not exactly one JSON object.
    public static func object(from bytes: [UInt8]) -> [String: JSONValue]? {
        JSONParser.parse(bytes)?.objectValue
    }

    /// Parses any JSON value strictly; nil when the bytes are not exactly one JSON value.
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        JSONParser.parse(bytes)
    }

    /// Serializes with sorted keys, compact or indented for people. The compact form is written
    /// here directly: it is on every token and response path, where JSONEncoder cost more than
    /// the signature.
    public func serialized(pretty: Bool = false) -> [UInt8] {
        guard pretty else {
            var output: [UInt8] = []
            output.reserveCapacity(256)
            write(to: &output)
            return output
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        return Array((try? encoder.encode(self)) ?? Data())
    }

    private func write(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let value):
            if !value.isFinite {
                output.append(contentsOf: "null".utf8)
            } else if value == value.rounded(), abs(value) < 1e15 {
                output.append(contentsOf: String(Int64(value)).utf8)
            } else {
                output.append(contentsOf: value.description.utf8)
            }
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            // Sorted by UTF-8 bytes, as JSONEncoder's .sortedKeys does for these keys; the members
            // themselves are sorted, so that no value is looked up again.
            for (index, member) in members.sorted(by: { Self.utf8Precedes($0.key, $1.key) }).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(member.key, to: &output)
                output.append(UInt8(ascii: ":"))
                member.value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// UTF-8 byte order, compared with `memcmp` where both keys are stored as UTF-8 (all but
    /// bridged strings): the generic comparison of two UTF-8 views cost about 160 instructions a
    /// pair, and a token's claims are sorted at every signature.
    private static func utf8Precedes(_ a: String, _ b: String) -> Bool {
        let compared = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y -> Bool in
                let common = min(x.count, y.count)
                if common > 0, let left = x.baseAddress, let right = y.baseAddress {
                    let order = memcmp(left, right, common)
                    if order != 0 { return order < 0 }
                }
                return x.count < y.count
            }
        }
        return (compared ?? nil) ?? a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func needsNoEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        ByteScan.firstIndex(of: UInt8(ascii: "\""), in: bytes) == nil && ByteScan.firstIndex(of: UInt8(ascii: "\\"), in: bytes) == nil
            && ByteScan.extremes(of: bytes).lowest >= 0x20
    }

    /// Copies each run of bytes that needs no escape at once (tokens and sealed values of a few
    /// kilobytes pass through here whole).
    private static func writeString(_ value: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { bytes in
            // Most strings (tokens, URLs, names) need no escape: checked by ``ByteScan`` and
            // copied whole.
            if Self.needsNoEscape(bytes) {
                output.append(contentsOf: bytes)
                return
            }
            var runStart = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                runStart = index + 1
                output.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): output.append(byte)
                case 0x0A: output.append(UInt8(ascii: "n"))
                case 0x0D: output.append(UInt8(ascii: "r"))
                case 0x09: output.append(UInt8(ascii: "t"))
                case 0x08: output.append(UInt8(ascii: "b"))
                case 0x0C: output.append(UInt8(ascii: "f"))
                default: output.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]])
                }
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        output.append(UInt8(ascii: "\""))
    }
}
