import RelaisCrypto

/// `application/x-www-form-urlencoded` parameters (a query string or a form body), kept in order
/// with repeats, because OAuth 2.0 forbids repeating a parameter (RFC 6749 §3.1) and an endpoint
/// must be able to say so instead of silently taking the first or last value.
public struct FormParameters: Sendable, Equatable {
    /// One `name=value` field (a struct, not a tuple: tuple arrays cost a runtime metadata lookup
    /// per generic call, which showed up in the forward-auth profile).
    public struct Pair: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    public private(set) var pairs: [Pair]

    /// Fields a form or query may hold. OAuth requests carry about ten; a body of thousands of tiny
    /// fields is an attack on the parser, refused as unreadable as soon as the count is passed
    /// (like Tomcat's `maxParameterCount`).
    public static let maxFields = 1000

    /// Parses `a=1&b=two+words&c=%C3%A9`; nil when a percent escape or the UTF-8 is invalid, or
    /// when there are more than ``maxFields`` fields.
    /// One pass over the UTF-8 bytes (splitting the String would walk grapheme clusters: 30 ms for a
    /// 64 KiB body of tiny fields, against under a millisecond here; `make bench` measures it).
    public init?(encoded: some StringProtocol) {
        var text = String(encoded)
        guard let parsed = text.withUTF8({ Self.parse($0) }) else { return nil }
        pairs = parsed
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> [Pair]? {
        var pairs: [Pair] = []
        var start = 0
        // Each byte is read by at most four `memchr` scans (`&`, then `=`, `+` and `%` within its
        // field): linear, and a few bytes an instruction over a code or a token of kilobytes.
        while start <= bytes.count {
            let rest = UnsafeBufferPointer(rebasing: bytes[start...])
            let end = start + (ByteScan.firstIndex(of: UInt8(ascii: "&"), in: rest) ?? rest.count)
            if end > start {
                guard pairs.count < maxFields else { return nil }
                let field = UnsafeBufferPointer(rebasing: bytes[start..<end])
                let equals = ByteScan.firstIndex(of: UInt8(ascii: "="), in: field).map { start + $0 }
                let escaped = hasEscape(field)
                let nameEnd = equals ?? end
                guard let name = decode(UnsafeBufferPointer(rebasing: bytes[start..<nameEnd]), escaped: escaped),
                    let value = decode(UnsafeBufferPointer(rebasing: bytes[(equals.map { $0 + 1 } ?? end)..<end]), escaped: escaped)
                else { return nil }
                pairs.append(Pair(name: name, value: value))
            }
            start = end + 1
        }
        return pairs
    }

    /// The single value of `name`; nil when absent. Check ``repeatedNames`` first.
    public subscript(_ name: String) -> String? { pairs.first { $0.name == name }?.value }

    public var names: [String] { pairs.map(\.name) }

    /// The first name seen a second time; nil when every name is given once. Stops at the first
    /// repeat, so a form of thousands of copies of one name costs two lookups.
    public var firstRepeatedName: String? {
        // A gateway's query holds a few names: comparing each with those before it costs less
        // than hashing them all. Past 8 the set keeps it linear.
        if pairs.count <= 8 {
            for index in pairs.indices.dropFirst() where pairs[..<index].contains(where: { $0.name == pairs[index].name }) { return pairs[index].name }
            return nil
        }
        var seen = Set<String>()
        seen.reserveCapacity(pairs.count)
        for pair in pairs where !seen.insert(pair.name).inserted { return pair.name }
        return nil
    }

    /// Names given more than once, in order of first appearance.
    public var repeatedNames: [String] {
        // Linear in the number of pairs: a form of thousands of tiny repeated parameters must not
        // cost a scan of the repeats for each one. One hash per pair: the count of each name.
        var counts: [String: Int] = [:]
        counts.reserveCapacity(pairs.count)
        var order: [String] = []
        func increment(_ count: inout Int) -> Int {
            count += 1
            return count
        }
        for pair in pairs where increment(&counts[pair.name, default: 0]) == 2 { order.append(pair.name) }
        return order
    }

    /// Percent-encodes for a query string or form body.
    public static func encode(_ pairs: [(String, String)]) -> String {
        String(decoding: encodedBytes(pairs), as: UTF8.self)
    }

    /// The same as bytes, a request's body.
    public static func encodedBytes(_ pairs: [(String, String)]) -> [UInt8] {
        // Escaped into one buffer: a string per name and value, then per pair, then joined, cost
        // about three times as much for a token request.
        var output: [UInt8] = []
        output.reserveCapacity(pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 2 })
        for (index, (name, value)) in pairs.enumerated() {
            if index > 0 { output.append(UInt8(ascii: "&")) }
            FormEncoding.escape(name, into: &output)
            output.append(UInt8(ascii: "="))
            FormEncoding.escape(value, into: &output)
        }
        return output
    }

    /// Appends parameters to a URL that may already hold a query.
    public static func url(_ base: String, adding pairs: [(String, String)]) -> String {
        base + (base.utf8.contains(UInt8(ascii: "?")) ? "&" : "?") + encode(pairs)
    }

    /// One form-encoded component (`+` a space, `%XX` a byte), decoded; nil when an escape or the
    /// UTF-8 is invalid. For names and values that come apart from a form (HTTP Basic's sides).
    public static func decodeComponent(_ text: Substring) -> String? {
        var text = text
        return text.withUTF8 { bytes in
            decode(bytes, escaped: hasEscape(bytes))
        }
    }

    /// Whether `text` holds a `+` or a `%` to decode.
    private static func hasEscape(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        ByteScan.firstIndex(of: UInt8(ascii: "%"), in: text) != nil || ByteScan.firstIndex(of: UInt8(ascii: "+"), in: text) != nil
    }

    private static func decode(_ text: UnsafeBufferPointer<UInt8>, escaped: Bool) -> String? {
        // Most fields need no decoding. The text comes from a String cut at ASCII `&` and `=`: it
        // is valid UTF-8 already, and is taken as it is.
        if !escaped { return String(decoding: text, as: UTF8.self) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count)
        var iterator = text.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(Hex.value(of:)), let low = iterator.next().flatMap(Hex.value(of:)) else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        // Invalid UTF-8 is refused. Decoding with repair changes such bytes (it puts U+FFFD in),
        // so bytes that come back unchanged were valid: `String(validating:)` is generic code the
        // compiler leaves unspecialised here, a runtime type lookup per call.
        let decoded = String(decoding: bytes, as: UTF8.self)
        return decoded.utf8.elementsEqual(bytes) ? decoded : nil
    }
}
