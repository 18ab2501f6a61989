import RelaisCrypto

/// A length-prefixed binary layout for the records kept for the whole life of a session: Redis holds
/// one per signed-in person, and JSON field names plus base64url text made up about half of each.
/// Strings are a LEB128 length then their UTF-8 bytes; numbers are fixed-width little-endian.
/// The first byte is a format tag that JSON (`{`) never starts with, so records written before
/// still read.
struct CompactWriter {
    private(set) var bytes: [UInt8]

    init(format: UInt8, capacity: Int = 256) {
        bytes = [format]
        bytes.reserveCapacity(capacity)
    }

    mutating func length(_ value: Int) {
        var value = UInt(value)
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func raw<Bytes: Collection<UInt8>>(_ value: Bytes) {
        length(value.count)
        bytes += value
    }

    mutating func string(_ value: String) { raw(value.utf8) }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func double(_ value: Double) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes += $0 }
    }

    /// A sealed payload (JWE compact, `dir`): its protected header, IV, ciphertext and tag as bytes
    /// rather than base64url, a quarter smaller. Kept as text when it would not come back
    /// identical (the header's base64url is the AES-GCM additional data).
    /// The header Relais' own sealing writes, but for its key id: stored as that id alone.
    static let sealedHeaderPrefix = Array(#"{"alg":"dir","enc":"A256GCM","kid":""#.utf8)
    static let sealedHeaderSuffix = Array(#""}"#.utf8)

    mutating func sealed(_ compact: String) {
        guard let decoded = Self.canonicalSegments(compact), decoded.count == 5, decoded[1].isEmpty else {
            byte(0)
            return string(compact)
        }
        let header = decoded[0]
        if header.starts(with: Self.sealedHeaderPrefix), header.count >= Self.sealedHeaderPrefix.count + Self.sealedHeaderSuffix.count,
            header.suffix(Self.sealedHeaderSuffix.count).elementsEqual(Self.sealedHeaderSuffix)
        {
            byte(2)
            raw(header[Self.sealedHeaderPrefix.count..<header.count - Self.sealedHeaderSuffix.count])
        } else {
            byte(1)
            raw(header)
        }
        for index in 2...4 { raw(decoded[index]) }
    }

    /// A JWS or any dot-separated base64url text: its segments as bytes when they come back
    /// identical (a signature covers the text), else the text.
    mutating func segments(_ compact: String) {
        guard let decoded = Self.canonicalSegments(compact) else {
            byte(0)
            return string(compact)
        }
        byte(1)
        length(decoded.count)
        for segment in decoded { raw(segment) }
    }

    /// The decoded segments when re-encoding each gives back exactly the text: Base64URL's decoder
    /// refuses padding and nonzero leftover bits, so a segment it decodes is that encoding.
    private static func canonicalSegments(_ compact: String) -> [[UInt8]]? {
        var compact = compact
        return compact.withUTF8 { text in
            var decoded: [[UInt8]] = []
            var start = 0
            for end in text.indices where text[end] == UInt8(ascii: ".") {
                guard let segment = Base64URL.decode(buffer: UnsafeBufferPointer(rebasing: text[start..<end])) else { return nil }
                decoded.append(segment)
                start = end + 1
            }
            guard let last = Base64URL.decode(buffer: UnsafeBufferPointer(rebasing: text[start...])) else { return nil }
            decoded.append(last)
            return decoded
        }
    }
}

/// Reads what ``CompactWriter`` wrote; every read checks the bounds and gives nil past them, so a
/// damaged record reads as absent rather than trapping.
struct CompactReader {
    private let bytes: [UInt8]
    private var offset: Int

    /// Nil unless `bytes` starts with `format`.
    init?(_ bytes: [UInt8], format: UInt8) {
        guard bytes.first == format else { return nil }
        self.bytes = bytes
        offset = 1
    }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func length() -> Int? {
        var value = 0
        var shift = 0
        while offset < bytes.count, shift < 35 {
            let next = bytes[offset]
            offset += 1
            value |= Int(next & 0x7F) << shift
            if next < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    mutating func raw() -> ArraySlice<UInt8>? {
        guard let count = length(), count <= bytes.count - offset else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func string() -> String? {
        guard let raw = raw() else { return nil }
        return String(validating: raw, as: UTF8.self)
    }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func double() -> Double? {
        guard bytes.count - offset >= 8 else { return nil }
        var pattern: UInt64 = 0
        for index in 0..<8 { pattern |= UInt64(bytes[offset + index]) << (8 * index) }
        offset += 8
        return Double(bitPattern: pattern)
    }

    mutating func sealed() -> String? {
        let header: [UInt8]
        switch byte() {
        case 0: return string()
        case 1:
            guard let bytes = raw() else { return nil }
            header = Array(bytes)
        case 2:
            guard let keyID = raw() else { return nil }
            header = CompactWriter.sealedHeaderPrefix + keyID + CompactWriter.sealedHeaderSuffix
        default: return nil
        }
        guard let iv = raw(), let ciphertext = raw(), let tag = raw() else { return nil }
        // `dir` has no encrypted key: the second part is empty.
        return "\(Base64URL.encode(header))..\(Base64URL.encode(iv)).\(Base64URL.encode(ciphertext)).\(Base64URL.encode(tag))"
    }

    mutating func segments() -> String? {
        switch byte() {
        case 0: return string()
        case 1:
            guard let count = length(), count <= bytes.count - offset else { return nil }
            var encoded: [String] = []
            for _ in 0..<count {
                guard let segment = raw() else { return nil }
                encoded.append(Base64URL.encode(segment))
            }
            return encoded.joined(separator: ".")
        default: return nil
        }
    }
}
