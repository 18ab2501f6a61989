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

    /// Parses `a=1&b=two+words&c=%C3%A9`; nil when a percent escape or the UTF-8 is invalid.
    public init?(encoded: some StringProtocol) {
        var pairs: [Pair] = []
        for field in encoded.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = field.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]), let value = Self.decode(parts.count > 1 ? parts[1] : "") else { return nil }
            pairs.append(Pair(name: name, value: value))
        }
        self.pairs = pairs
    }

    /// The single value of `name`; nil when absent. Check ``repeatedNames`` first.
    public subscript(_ name: String) -> String? { pairs.first { $0.name == name }?.value }

    public var names: [String] { pairs.map(\.name) }

    /// Names given more than once, in order of first appearance.
    public var repeatedNames: [String] {
        // Linear in the number of pairs: a form of thousands of tiny repeated parameters must not
        // cost a scan of the repeats for each one.
        var seen = Set<String>()
        var reported = Set<String>()
        var repeated: [String] = []
        for pair in pairs where !seen.insert(pair.name).inserted && reported.insert(pair.name).inserted { repeated.append(pair.name) }
        return repeated
    }

    /// Percent-encodes for a query string or form body.
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(FormEncoding.escape($0.0))=\(FormEncoding.escape($0.1))" }.joined(separator: "&")
    }

    /// Appends parameters to a URL that may already hold a query.
    public static func url(_ base: String, adding pairs: [(String, String)]) -> String {
        base + (base.contains("?") ? "&" : "?") + encode(pairs)
    }

    private static func decode(_ text: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
