/// Base64url without padding (RFC 4648 §5), the encoding of every JOSE and OAuth token.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode<Bytes: Collection<UInt8>>(_ data: Bytes) -> String {
        // Arrays and UTF-8 views are contiguous: encoded in place, into a string made once.
        if let encoded = data.withContiguousStorageIfAvailable({ encode(buffer: $0) }) { return encoded }
        return Array(data).withUnsafeBufferPointer { encode(buffer: $0) }
    }

    private static func encode(buffer bytes: UnsafeBufferPointer<UInt8>) -> String {
        // The alphabet read through one pointer: an array subscript per character (its bounds
        // check and the static's accessor) cost more than the arithmetic.
        alphabet.withUnsafeBufferPointer { alphabet in encode(buffer: bytes, alphabet: alphabet) }
    }

    private static func encode(buffer bytes: UnsafeBufferPointer<UInt8>, alphabet: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: (bytes.count * 4 + 2) / 3) { output in
            var index = 0
            var count = 0
            while index + 3 <= bytes.count {
                let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
                output[count] = alphabet[Int(chunk >> 18 & 63)]
                output[count + 1] = alphabet[Int(chunk >> 12 & 63)]
                output[count + 2] = alphabet[Int(chunk >> 6 & 63)]
                output[count + 3] = alphabet[Int(chunk & 63)]
                index += 3
                count += 4
            }
            let remaining = bytes.count - index
            if remaining > 0 {
                var chunk = UInt32(bytes[index]) << 16
                if remaining == 2 { chunk |= UInt32(bytes[index + 1]) << 8 }
                output[count] = alphabet[Int(chunk >> 18 & 63)]
                output[count + 1] = alphabet[Int(chunk >> 12 & 63)]
                count += 2
                if remaining == 2 {
                    output[count] = alphabet[Int(chunk >> 6 & 63)]
                    count += 1
                }
            }
            return count
        }
    }

    /// Decodes base64url without padding; nil for any character outside the alphabet, for padding,
    /// or for a length that no encoding produces.
    public static func decode(_ string: String) -> [UInt8]? {
        var string = string
        return string.withUTF8 { decode(buffer: $0) }
    }

    /// Decodes base64url text given as bytes (a segment of a compact token, without a String copy).
    public static func decode(bytes: ArraySlice<UInt8>) -> [UInt8]? {
        bytes.withUnsafeBufferPointer { decode(buffer: $0) }
    }

    public static func decode(buffer input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let remainder = input.count % 4
        if remainder == 1 { return nil }
        let fullGroups = input.count / 4
        let outputCount = fullGroups * 3 + (remainder == 0 ? 0 : remainder - 1)
        var valid = true
        let output = [UInt8](uninitializedBytes: outputCount) { out, initialized in
            decodingTable.withUnsafeBufferPointer { table in
                // Four characters make three bytes; an invalid character sets the high bit (0xFF)
                // of its value, checked once per group rather than per character.
                var written = 0
                for group in 0..<fullGroups {
                    let base = group * 4
                    let a = UInt32(table[Int(input[base])]), b = UInt32(table[Int(input[base + 1])])
                    let c = UInt32(table[Int(input[base + 2])]), d = UInt32(table[Int(input[base + 3])])
                    if (a | b | c | d) & 0x80 != 0 {
                        valid = false
                        return
                    }
                    let chunk = a << 18 | b << 12 | c << 6 | d
                    out[written] = UInt8(truncatingIfNeeded: chunk >> 16)
                    out[written + 1] = UInt8(truncatingIfNeeded: chunk >> 8)
                    out[written + 2] = UInt8(truncatingIfNeeded: chunk)
                    written += 3
                }
                if remainder > 0 {
                    let base = fullGroups * 4
                    let a = UInt32(table[Int(input[base])]), b = UInt32(table[Int(input[base + 1])])
                    let c = remainder == 3 ? UInt32(table[Int(input[base + 2])]) : 0
                    if (a | b | c) & 0x80 != 0 {
                        valid = false
                        return
                    }
                    let chunk = a << 18 | b << 12 | c << 6
                    // Leftover bits must be zero, or two strings would decode to the same bytes.
                    if remainder == 2 && chunk & 0xFFFF != 0 || remainder == 3 && chunk & 0xFF != 0 {
                        valid = false
                        return
                    }
                    out[written] = UInt8(truncatingIfNeeded: chunk >> 16)
                    written += 1
                    if remainder == 3 {
                        out[written] = UInt8(truncatingIfNeeded: chunk >> 8)
                        written += 1
                    }
                }
            }
            initialized = valid ? outputCount : 0
        }
        return valid ? output : nil
    }

    /// 0xFF marks bytes outside the base64url alphabet.
    private static let decodingTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()
}

/// Lowercase hexadecimal.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode<Bytes: Collection<UInt8>>(_ data: Bytes) -> String {
        var output = [UInt8]()
        output.reserveCapacity(data.count * 2)
        for byte in data {
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The value of one hexadecimal digit, either case; nil for anything else (percent-decoding).
    public static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Standard base64 with padding (RFC 4648 §4), for HTTP Basic credentials.
public enum Base64 {
    public static func encode<Bytes: Collection<UInt8>>(_ data: Bytes) -> String {
        var text = Array(Base64URL.encode(data).utf8)
        for index in text.indices {
            if text[index] == UInt8(ascii: "-") { text[index] = UInt8(ascii: "+") } else if text[index] == UInt8(ascii: "_") { text[index] = UInt8(ascii: "/") }
        }
        while text.count % 4 != 0 { text.append(UInt8(ascii: "=")) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Decodes standard base64, padding optional (at most two `=`, at the end only); base64url text
    /// is accepted too, as people paste either. Read on the bytes: HTTP Basic credentials come with
    /// every introspection request.
    public static func decode(_ text: String) -> [UInt8]? {
        var bytes = Array(text.utf8)
        if bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        if bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        for index in bytes.indices {
            if bytes[index] == UInt8(ascii: "+") { bytes[index] = UInt8(ascii: "-") } else if bytes[index] == UInt8(ascii: "/") { bytes[index] = UInt8(ascii: "_") }
        }
        return bytes.withUnsafeBufferPointer { Base64URL.decode(buffer: $0) }
    }
}

/// Compact JOSE serializations: what their shape is, read without decoding them.
public enum CompactSerialization {
    /// The dots in `text` (4 in a JWE, 2 in a JWS), found by ``ByteScan``: a byte-by-byte loop
    /// cost about 4 instructions a byte (7,500 per 2 KB code), a lazy filter over a String's UTF-8
    /// view about 30.
    public static func dots(in text: String) -> Int {
        var text = text
        return text.withUTF8 { ByteScan.count(of: UInt8(ascii: "."), in: $0) }
    }

    /// The dot-separated segments of `bytes`, as ranges, empty ones included (`a..b` is three),
    /// found by ``ByteScan``: `split` calls a closure per byte, 26,000 instructions per 2 KB code.
    public static func segments(of bytes: [UInt8]) -> [Range<Int>] {
        bytes.withUnsafeBufferPointer { buffer in
            var ranges: [Range<Int>] = []
            var start = 0
            while let dot = ByteScan.firstIndex(of: UInt8(ascii: "."), in: UnsafeBufferPointer(rebasing: buffer[start...])) {
                ranges.append(start..<(start + dot))
                start += dot + 1
            }
            ranges.append(start..<buffer.count)
            return ranges
        }
    }
}
