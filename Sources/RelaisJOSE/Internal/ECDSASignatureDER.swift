import RelaisCrypto

/// ECDSA signatures between JOSE's form (`r || s`, each left-padded to the curve's size, RFC 7518
/// §3.4) and the DER `SEQUENCE { INTEGER r, INTEGER s }` OpenSSL signs and verifies. Written out
/// rather than through OpenSSL's ECDSA_SIG and BIGNUMs: one array each way instead of about ten
/// allocations, on every id_token check and token signature.
extension SignatureEngine {
    static func ecdsaRawToDER(_ raw: [UInt8], coordinateSize: Int) throws(JOSEError) -> [UInt8] {
        guard raw.count == 2 * coordinateSize else { throw .cryptoFailure(reason: "an ECDSA signature of \(raw.count) bytes, not \(2 * coordinateSize)") }
        let r = minimalInteger(raw[0..<coordinateSize])
        let s = minimalInteger(raw[coordinateSize...])
        // Each INTEGER: tag, one length byte (at most 67 bytes for P-521), a zero byte when the
        // first bit is set (DER integers are signed), the magnitude.
        let content = 2 + r.length + 2 + s.length
        var der: [UInt8] = []
        der.reserveCapacity(3 + content)
        der.append(0x30)
        if content >= 0x80 { der.append(0x81) }
        der.append(UInt8(content))
        for integer in [r, s] {
            der.append(0x02)
            der.append(UInt8(integer.length))
            if integer.needsSignByte { der.append(0) }
            der.append(contentsOf: integer.magnitude)
        }
        return der
    }

    static func ecdsaDERToRaw(_ der: [UInt8], coordinateSize: Int) throws(JOSEError) -> [UInt8] {
        let malformed = JOSEError.cryptoFailure(reason: "a malformed DER ECDSA signature")
        var index = 0
        func byte() throws(JOSEError) -> Int {
            guard index < der.count else { throw malformed }
            defer { index += 1 }
            return Int(der[index])
        }
        func length() throws(JOSEError) -> Int {
            let first = try byte()
            if first < 0x80 { return first }
            guard first == 0x81 else { throw malformed }
            let long = try byte()
            guard long >= 0x80 else { throw malformed }  // DER: the short form when it fits
            return long
        }
        guard try byte() == 0x30, try length() == der.count - index else { throw malformed }
        var raw = [UInt8](zeroedBytes: 2 * coordinateSize)
        for half in 0..<2 {
            guard try byte() == 0x02 else { throw malformed }
            let count = try length()
            guard count > 0, index + count <= der.count else { throw malformed }
            var magnitude = der[index..<index + count]
            index += count
            // One leading zero only, and only before a set first bit (DER's minimal encoding); a
            // set first bit without it is a negative INTEGER, which r and s never are.
            if magnitude.count > 1, magnitude.first == 0 {
                guard magnitude[magnitude.startIndex + 1] & 0x80 != 0 else { throw malformed }
                magnitude = magnitude.dropFirst()
            } else if magnitude.first! & 0x80 != 0 {
                throw malformed
            }
            guard magnitude.count <= coordinateSize else { throw malformed }
            let end = (half + 1) * coordinateSize
            raw.replaceSubrange((end - magnitude.count)..<end, with: magnitude)
        }
        guard index == der.count else { throw malformed }
        return raw
    }

    /// A big-endian unsigned value without its leading zero bytes (zero keeps one byte).
    private static func minimalInteger(_ bytes: ArraySlice<UInt8>) -> (magnitude: ArraySlice<UInt8>, needsSignByte: Bool, length: Int) {
        var magnitude = bytes.drop { $0 == 0 }
        if magnitude.isEmpty { magnitude = bytes.suffix(1) }
        let needsSignByte = magnitude.first! & 0x80 != 0
        return (magnitude, needsSignByte, magnitude.count + (needsSignByte ? 1 : 0))
    }
}
