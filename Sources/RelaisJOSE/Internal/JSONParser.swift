import RelaisCrypto

/// A strict JSON parser (RFC 8259) for token headers, claims and JWKs, on bytes.
///
/// Why not JSONDecoder: it costs more than the signature check of an ES256 token, and it keeps
/// duplicate member names silently. JOSE requires rejecting them (RFC 7515 §4), since two parsers
/// disagreeing on which `alg` or `iss` counts is an attack. Depth is capped so hostile input cannot
/// exhaust the stack.
struct JSONParser {
    enum Failure: Error { case invalid }

    static let maxDepth = 32

    // Reads through an unsafe view of the caller's array, valid for the duration of `parse` only.
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    static func parse(_ input: [UInt8]) -> JSONValue? {
        input.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer)
            do {
                parser.skipWhitespace()
                let value = try parser.value(depth: 0)
                parser.skipWhitespace()
                return parser.index == buffer.count ? value : nil
            } catch {
                return nil
            }
        }
    }

    /// Locates the members of a top-level object without decoding string values: the whole document
    /// is still checked against the same grammar (duplicates refused), but a claim nobody reads costs
    /// no allocation. Values are decoded on demand with ``parse(_:range:)``.
    static func index(_ input: [UInt8]) -> JSONObjectView.Members? {
        input.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer)
            var index = JSONObjectView.Members()
            do {
                parser.skipWhitespace()
                guard parser.index < buffer.count, buffer[parser.index] == UInt8(ascii: "{") else { return nil }
                parser.index += 1
                parser.skipWhitespace()
                if parser.index < buffer.count, buffer[parser.index] == UInt8(ascii: "}") {
                    parser.index += 1
                } else {
                    while true {
                        parser.skipWhitespace()
                        guard parser.index < buffer.count, buffer[parser.index] == UInt8(ascii: "\"") else { return nil }
                        let nameStart = parser.index + 1
                        let escaped = try parser.skipString()
                        let nameRange = nameStart..<(parser.index - 1)
                        // An escaped name is compared by its decoded bytes.
                        let decodedName: [UInt8]? = escaped ? Array(try JSONParser.decodeString(buffer, from: nameStart - 1).utf8) : nil
                        parser.skipWhitespace()
                        guard parser.index < buffer.count, buffer[parser.index] == UInt8(ascii: ":") else { return nil }
                        parser.index += 1
                        parser.skipWhitespace()
                        let start = parser.index
                        if start < buffer.count, buffer[start] == UInt8(ascii: "\"") {
                            _ = try parser.skipString()
                        } else {
                            _ = try parser.value(depth: 1)
                        }
                        guard index.append(name: nameRange, decodedName: decodedName, value: start..<parser.index, in: buffer) else { return nil }
                        parser.skipWhitespace()
                        guard parser.index < buffer.count else { return nil }
                        if buffer[parser.index] == UInt8(ascii: ",") {
                            parser.index += 1
                        } else if buffer[parser.index] == UInt8(ascii: "}") {
                            parser.index += 1
                            break
                        } else {
                            return nil
                        }
                    }
                }
                parser.skipWhitespace()
                return parser.index == buffer.count ? index : nil
            } catch {
                return nil
            }
        }
    }

    private static func decodeString(_ buffer: UnsafeBufferPointer<UInt8>, from quote: Int) throws(Failure) -> String {
        var parser = JSONParser(buffer)
        parser.index = quote
        return try parser.string()
    }

    /// Decodes one value located by ``index(_:)``.
    static func parse(_ input: [UInt8], range: Range<Int>) -> JSONValue? {
        input.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(UnsafeBufferPointer(rebasing: buffer[range]))
            return try? parser.value(depth: 1)
        }
    }

    /// Decodes a string token (quotes included) located by ``index(_:)``.
    static func decodeString(_ buffer: UnsafeBufferPointer<UInt8>, range: Range<Int>) -> String? {
        try? decodeString(buffer, from: range.lowerBound)
    }

    /// Checks a string token without building it: plain ASCII needs no work; escapes and non-ASCII
    /// bytes go through the full decoder, whose result is dropped. Returns whether it held escapes.
    private mutating func skipString() throws(Failure) -> Bool {
        let start = index
        if let run = try plainRun(from: start + 1), !run.nonASCII {
            index = run.end + 1
            return false
        }
        index += 1
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return false
            }
            if byte == UInt8(ascii: "\\") || byte >= 0x80 {
                index = start
                _ = try string()
                return bytes[start..<index].contains(UInt8(ascii: "\\"))
            }
            guard byte >= 0x20 else { throw .invalid }
            index += 1
        }
        throw .invalid
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
            index += 1
        }
    }

    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard depth < Self.maxDepth, index < bytes.count else { throw .invalid }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default: return .number(try number())
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw .invalid }
        let matches = word.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
        }
        guard matches else { throw .invalid }
        index += count
    }

    private mutating func object(depth: Int) throws(Failure) -> JSONValue {
        index += 1  // {
        var members = [String: JSONValue](minimumCapacity: 16)
        if closesAtOnce(UInt8(ascii: "}")) { return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw .invalid }
            let name = try string()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw .invalid }
            index += 1
            skipWhitespace()
            let member = try value(depth: depth + 1)
            guard members.updateValue(member, forKey: name) == nil else { throw .invalid }  // duplicate name
            if try closes(with: UInt8(ascii: "}")) { return .object(members) }
        }
    }

    /// Just after `{` or `[`: an empty container, which is then read past.
    private mutating func closesAtOnce(_ closer: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == closer else { return false }
        index += 1
        return true
    }

    private mutating func array(depth: Int) throws(Failure) -> JSONValue {
        index += 1  // [
        var elements: [JSONValue] = []
        if closesAtOnce(UInt8(ascii: "]")) { return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth + 1))
            if try closes(with: UInt8(ascii: "]")) { return .array(elements) }
        }
    }

    /// After a member or element: a comma (false, more follow) or the closing bracket (true).
    private mutating func closes(with closing: UInt8) throws(Failure) -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw .invalid }
        switch bytes[index] {
        case UInt8(ascii: ","):
            index += 1
            return false
        case closing:
            index += 1
            return true
        default:
            throw .invalid
        }
    }

    private mutating func string() throws(Failure) -> String {
        index += 1  // opening quote
        let start = index
        if let run = try plainRun(from: start) {
            guard let text = Self.text(UnsafeBufferPointer(rebasing: bytes[start..<run.end]), isASCII: !run.nonASCII) else { throw .invalid }
            index = run.end + 1
            return text
        }
        // An escape before the first quote, or no closing quote: read byte by byte, each run
        // between escapes checked as UTF-8.
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flush(_ end: Int) throws(Failure) {
            guard let run = Self.text(UnsafeBufferPointer(rebasing: bytes[runStart..<end]), isASCII: false) else { throw .invalid }
            scalars.append(contentsOf: run.unicodeScalars)
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                try flush(index)
                index += 1
                return String(scalars)
            }
            guard byte >= 0x20 else { throw .invalid }
            if byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            try flush(index)
            index += 1
            guard index < bytes.count else { throw .invalid }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                let high = try hex4()
                if (0xD800...0xDBFF).contains(high) {
                    // A surrogate pair: \uD83D\uDE00.
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { throw .invalid }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low),
                        let scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                    else { throw .invalid }
                    scalars.append(scalar)
                } else {
                    guard let scalar = Unicode.Scalar(high) else { throw .invalid }  // lone low surrogate
                    scalars.append(scalar)
                }
            default:
                throw .invalid
            }
            runStart = index
        }
        throw .invalid
    }

    /// Where the text of a string starting at `start` ends (its closing quote) when that text has
    /// no escape, and whether it has a byte of 0x80 or above; nil when it has an escape or no
    /// closing quote, for the byte-by-byte path to read. A control character in it is refused
    /// here. Read by ``ByteScan``, many bytes per instruction.
    private func plainRun(from start: Int) throws(Failure) -> (end: Int, nonASCII: Bool)? {
        guard start <= bytes.count else { return nil }
        let rest = UnsafeBufferPointer(rebasing: bytes[start...])
        guard let length = ByteScan.firstIndex(of: UInt8(ascii: "\""), in: rest) else { return nil }
        let run = UnsafeBufferPointer(rebasing: rest[..<length])
        if ByteScan.firstIndex(of: UInt8(ascii: "\\"), in: run) != nil { return nil }
        let (lowest, highest) = ByteScan.extremes(of: run)
        guard lowest >= 0x20 else { throw .invalid }
        return (start + length, highest >= 0x80)
    }

    /// ASCII needs no validation, and `String(decoding:)` is specialized where `String(validating:)`
    /// looks up generic metadata on every call, a measurable share of a token's parse time.

    private static func text(_ bytes: UnsafeBufferPointer<UInt8>, isASCII: Bool) -> String? {
        isASCII ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard index + 4 <= bytes.count else { throw .invalid }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw .invalid
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// RFC 8259 number grammar, then Double's own parser on the validated text.
    private mutating func number() throws(Failure) -> Double {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            return index - from
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw .invalid }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() > 0 else { throw .invalid }
        }
        // Fast path: a plain integer of up to 15 digits (exp, iat, auth_time) is exact in a Double
        // and needs no text round trip.
        let integerEnd = index
        let isPlainInteger =
            index >= bytes.count
            || (bytes[index] != UInt8(ascii: ".") && bytes[index] != UInt8(ascii: "e") && bytes[index] != UInt8(ascii: "E"))
        if isPlainInteger {
            let negative = bytes[start] == UInt8(ascii: "-")
            let first = negative ? start + 1 : start
            if integerEnd - first <= 15 {
                var value: Int64 = 0
                for position in first..<integerEnd { value = value * 10 + Int64(bytes[position] - UInt8(ascii: "0")) }
                return Double(negative ? -value : value)
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw .invalid }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw .invalid }
        }
        guard let value = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)), value.isFinite else { throw .invalid }
        return value
    }
}
