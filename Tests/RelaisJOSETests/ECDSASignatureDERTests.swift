import RelaisCrypto
import RelaisTestSupport
import Testing

@testable import RelaisJOSE

/// JOSE's `r || s` and DER's `SEQUENCE { INTEGER r, INTEGER s }`, both ways. The expected DER was
/// written out by hand from X.690's rules (minimal integers, a zero byte before a set first bit,
/// the long length form from 128 bytes).
@Suite(.tags(.fast)) struct ECDSASignatureDERTests {
    static let vectors: [(raw: String, der: String, size: Int)] = [
        // r's first bit set (a sign byte), s with two leading zero bytes.
        (
            "80" + String(repeating: "01", count: 31) + "00007f" + String(repeating: "02", count: 29),
            "3043022100" + "80" + String(repeating: "01", count: 31) + "021e7f" + String(repeating: "02", count: 29), 32
        ),
        // r zero, s five.
        (String(repeating: "00", count: 32) + String(repeating: "00", count: 31) + "05", "3006020100020105", 32),
        // P-521: 132 bytes of content, the long length form; s's zero byte kept before a set bit.
        (
            "01" + String(repeating: "ff", count: 65) + "0080" + String(repeating: "11", count: 64),
            "308188024201" + String(repeating: "ff", count: 65) + "02420080" + String(repeating: "11", count: 64), 66
        ),
    ]

    static func bytes(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    @Test func rawAndDERMatchHandWrittenVectors() throws {
        for vector in Self.vectors {
            let raw = try #require(Self.bytes(vector.raw))
            let der = try #require(Self.bytes(vector.der))
            #expect(Hex.encode(try SignatureEngine.ecdsaRawToDER(raw, coordinateSize: vector.size)) == vector.der)
            #expect(try SignatureEngine.ecdsaDERToRaw(der, coordinateSize: vector.size) == raw)
        }
    }

    /// Signatures OpenSSL makes, for every curve, verify after the round trip: many of them, so
    /// that short and sign-byte integers come up.
    @Test func openSSLSignaturesSurviveTheRoundTrip() throws {
        for (algorithm, size) in [(JWSAlgorithm.es256, 32), (.es384, 48), (.es512, 66)] {
            let key = try JWK.generate(for: algorithm)
            for index in 0..<100 {
                let token = try JWS.sign(payload: Array("payload \(index)".utf8), with: key, algorithm: algorithm)
                let parsed = try JWS.parse(token)
                #expect(parsed.signature.count == 2 * size)
                let der = try SignatureEngine.ecdsaRawToDER(parsed.signature, coordinateSize: size)
                #expect(try SignatureEngine.ecdsaDERToRaw(der, coordinateSize: size) == parsed.signature)
                try parsed.verify(with: key)
            }
        }
    }

    @Test func malformedDERIsRefused() throws {
        let good = try #require(Self.bytes("3006020100020105"))
        let cases: [String: String] = [
            "not a sequence": "3106020100020105",
            "length beyond the end": "3007020100020105",
            "trailing byte": "300602010002010500",
            "long form for a short length": "30810602010002010500",
            "not an integer": "3006030100020105",
            "empty integer": "30050200020105",
            "a needless leading zero": "300702020005020105",
            // A sequence whose length is right, so that the integer's own length is what refuses it.
            "longer than the curve": "3026022101" + String(repeating: "00", count: 32) + "020105",
            "negative": "3006020180020105",
            "truncated": "300602010002",
            "empty": "",
        ]
        #expect(try SignatureEngine.ecdsaDERToRaw(good, coordinateSize: 32).count == 64)
        for (name, hex) in cases {
            let der = try #require(Self.bytes(hex), "\(name)")
            #expect(throws: JOSEError.self, "\(name)") { try SignatureEngine.ecdsaDERToRaw(der, coordinateSize: 32) }
        }
        #expect(throws: JOSEError.self) { try SignatureEngine.ecdsaRawToDER([1, 2, 3], coordinateSize: 32) }
    }
}
