/// Base64url without padding (RFC 4648 §5), the encoding of every JOSE and OAuth token.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode<Bytes: Collection<UInt8>>(_ data: Bytes) -> String {
        let bytes = Array(data)
        var output = [UInt8]()
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            output.append(alphabet[Int(chunk >> 6 & 63)])
            output.append(alphabet[Int(chunk & 63)])
            index += 3
        }
        let remaining = bytes.count - index
        if remaining > 0 {
            var chunk = UInt32(bytes[index]) << 16
            if remaining == 2 { chunk |= UInt32(bytes[index + 1]) << 8 }
            output.append(alphabet[Int(chunk >> 18 & 63)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            if remaining == 2 { output.append(alphabet[Int(chunk >> 6 & 63)]) }
        }
        return String(decoding: output, as: UTF8.self)
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
        if input.count % 4 == 1 { return nil }
        let outputCount = input.count * 3 / 4
        var valid = true
        let output = [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
            var accumulator: UInt32 = 0
            var bits = 0
            var written = 0
            decodingTable.withUnsafeBufferPointer { table in
                for character in input {
                    let value = table[Int(character)]
                    if value == 0xFF {
                        valid = false
                        break
                    }
                    accumulator = accumulator << 6 | UInt32(value)
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                        written += 1
                    }
                }
            }
            // Leftover bits must be zero, or two strings would decode to the same bytes.
            if bits > 0, accumulator & ((1 << UInt32(bits)) - 1) != 0 { valid = false }
            initialized = written
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
}
