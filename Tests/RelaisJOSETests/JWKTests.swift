import Foundation
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@Suite(.tags(.fast)) struct JWKTests {
    private func jwk(_ json: String) throws -> JWK { try JWK(json: Array(json.utf8)) }

    @Test func publicExportNeverCarriesPrivateMembers() throws {
        for alg in ["RS256", "ES256", "ES512", "EdDSA"] {
            let vector = Vectors.named(alg)
            let privateKey = try JWK(object: vector.private_jwk)
            let exported = try #require(privateKey.publicJSON())
            for member in ["d", "p", "q", "dp", "dq", "qi", "k"] { #expect(exported[member] == nil) }
            // The export is exactly joserfc's public JWK.
            #expect(exported == vector.public_jwk)
        }
        #expect(try JWK(object: Vectors.named("HS256").private_jwk).publicJSON() == nil)
    }

    @Test func keySetDocumentOmitsSymmetricKeys() throws {
        let set = JWKSet(keys: try ["ES256", "HS256", "RS256"].map { try JWK(object: Vectors.named($0).private_jwk) })
        let document = JSONValue.object(from: set.publicJSON())
        let keys = try #require(document?["keys"]?.arrayValue)
        #expect(keys.count == 2)
        #expect(!String(decoding: set.publicJSON(), as: UTF8.self).contains("\"d\""))
    }

    @Test func keySelectionByKidTypeAndUse() throws {
        let es = try JWK(object: Vectors.named("ES256").public_jwk!)
        let rs = try JWK(object: Vectors.named("RS256").public_jwk!)
        var encodingOnly = Vectors.named("ES256").public_jwk!
        encodingOnly["use"] = .string("enc")
        encodingOnly["kid"] = .string("enc-key")
        let set = JWKSet(keys: [es, rs, try JWK(object: encodingOnly)])
        #expect(try set.key(for: .es256, keyID: "joserfc-es256").keyID == "joserfc-es256")
        #expect(try set.key(for: .rs256, keyID: nil).keyID == "joserfc-rs256")  // the only RSA key
        #expect(throws: JOSEError.noMatchingKey(reason: "no ES256 key with kid 'enc-key'")) { try set.key(for: .es256, keyID: "enc-key") }
        #expect(throws: JOSEError.noMatchingKey(reason: "no ES256 key with kid 'rotated'")) { try set.key(for: .es256, keyID: "rotated") }
        // Without a kid, two candidates are ambiguous.
        let twoEC = JWKSet(keys: [es, try JWK(object: Vectors.named("ES256").private_jwk)])
        #expect(throws: JOSEError.noMatchingKey(reason: "the token has no kid and 2 keys suit ES256")) { try twoEC.key(for: .es256, keyID: nil) }
        #expect(throws: JOSEError.noMatchingKey(reason: "no key suits EdDSA")) { try set.key(for: .edDSA, keyID: nil) }
    }

    @Test func keySetsSkipUnsupportedKeysButRejectBrokenOnes() throws {
        let p256 = Vectors.named("ES256").public_jwk!
        let document = JSONValue.object([
            "keys": .array([
                .object(p256), .object(["kty": .string("EC"), "crv": .string("secp256k1"), "x": .string("AA"), "y": .string("AA")]),
                .object(["kty": .string("OKP"), "crv": .string("X448"), "x": .string("AA")]),
            ])
        ]).serialized()
        #expect(try JWKSet(json: document).keys.count == 1)
        var broken = p256
        broken["x"] = .string("not base64!")
        let brokenDocument = JSONValue.object(["keys": .array([.object(broken)])]).serialized()
        #expect(throws: JOSEError.invalidKey(reason: "'x' is not base64url")) { try JWKSet(json: brokenDocument) }
        #expect(throws: JOSEError.invalidKey(reason: "a JWK Set is an object with a 'keys' array")) { try JWKSet(json: Array("[]".utf8)) }
    }

    @Test func invalidKeysGetSpecificReasons() throws {
        let p256 = Vectors.named("ES256").public_jwk!
        let x = p256["x"]!.stringValue!
        let y = p256["y"]!.stringValue!
        #expect(throws: JOSEError.invalidKey(reason: "'kty' is missing")) { try jwk(#"{"x":"AA"}"#) }
        #expect(throws: JOSEError.invalidKey(reason: "unsupported kty 'DSA'")) { try jwk(#"{"kty":"DSA"}"#) }
        #expect(throws: JOSEError.invalidKey(reason: "'crv' is missing")) { try jwk(#"{"kty":"EC","x":"\#(x)","y":"\#(y)"}"#) }
        #expect(throws: JOSEError.invalidKey(reason: "'x' and 'y' must be 32 bytes for P-256")) { try jwk(#"{"kty":"EC","crv":"P-256","x":"AAAA","y":"\#(y)"}"#) }
        #expect(throws: JOSEError.invalidKey(reason: "'n' is missing")) { try jwk(#"{"kty":"RSA","e":"AQAB"}"#) }
        #expect(throws: JOSEError.invalidKey(reason: "'k' is empty")) { try jwk(#"{"kty":"oct","k":""}"#) }
        #expect(throws: JOSEError.invalidKey(reason: "'kid' must be a string")) { try jwk(#"{"kty":"oct","k":"AAAA","kid":5}"#) }
        #expect(throws: JOSEError.invalidKey(reason: "not a JSON object")) { try jwk("[1,2]") }
        // A point that is not on the curve (y changed) is refused by OpenSSL.
        var yBytes = Base64URL.decode(y)!
        yBytes[31] ^= 0x01
        let offCurve = #"{"kty":"EC","crv":"P-256","x":"\#(x)","y":"\#(Base64URL.encode(yBytes))"}"#
        #expect(throws: JOSEError.self) { try jwk(offCurve) }
        // A private RSA key without its CRT members.
        var partial = Vectors.named("RS256").private_jwk
        partial["dp"] = nil
        #expect(throws: JOSEError.invalidKey(reason: "'dp' is missing")) { try JWK(object: partial) }
        // Ed25519: x must match d.
        var mismatched = Vectors.named("EdDSA").private_jwk
        mismatched["x"] = .string(Base64URL.encode(Array(repeating: UInt8(9), count: 32)))
        #expect(throws: JOSEError.invalidKey(reason: "'x' does not match the private key 'd'")) { try JWK(object: mismatched) }
    }

    /// Each verification is an exponentiation by `e` modulo `n`, and a DPoP proof brings its own
    /// key: an exponent of 200 bytes or a modulus of 16,384 bits would make one unauthenticated
    /// request cost hundreds of ordinary ones. `e` is odd, at least 3, under 2^32; `n` 8192 bits at most.
    @Test func rsaKeysOfCostlyOrBrokenSizesAreRefused() throws {
        var key = Vectors.named("RS256").public_jwk!
        for e in [[0xff] + Array(repeating: UInt8(0xff), count: 199) + [0x01], [0x02], [0x01], [0x01, 0x00, 0x00, 0x00, 0x01]] {
            key["e"] = .string(Base64URL.encode(e))
            #expect(throws: JOSEError.invalidKey(reason: "an RSA exponent 'e' must be odd, at least 3 and under 2^32"), "\(e.count) bytes") { try JWK(object: key) }
        }
        key["e"] = .string(Base64URL.encode([0x01, 0x00, 0x01]))
        #expect((try? JWK(object: key)) != nil)
        key["n"] = .string(Base64URL.encode([0xc5] + Array(repeating: UInt8(0x11), count: 1024)))
        #expect(throws: JOSEError.invalidKey(reason: "RSA keys over 8192 bits are refused")) { try JWK(object: key) }
    }

    /// A private key whose parts do not belong together (a `d` that is not the public point's, a
    /// `p` that is not a factor of `n`) would sign what its published half never verifies.
    @Test func privateKeysWhosePartsDoNotMatchAreRefused() throws {
        var ec = Vectors.named("ES256").private_jwk
        ec["d"] = .string(Base64URL.encode(Array(repeating: 0, count: 31) + [1]))
        #expect(throws: JOSEError.invalidKey(reason: "the EC key's private part does not match its public part")) { try JWK(object: ec) }
        var rsa = Vectors.named("RS256").private_jwk
        var d = Base64URL.decode(rsa["d"]!.stringValue!)!
        d[d.count - 1] ^= 0x02
        rsa["d"] = .string(Base64URL.encode(d))
        #expect(throws: JOSEError.invalidKey(reason: "the RSA key's private part does not match its public part")) { try JWK(object: rsa) }
        for name in ["ES256", "RS256", "PS256"] { #expect((try? JWK(object: Vectors.named(name).private_jwk)) != nil, "\(name)") }
    }

    @Test func shortRSAKeysAreRefusedForSignatures() throws {
        // A 1024-bit modulus (RFC 7517 Appendix A-sized) imports but never verifies.
        let n = Base64URL.encode([0xc5] + Array(repeating: UInt8(0x11), count: 127))
        let key = try jwk(#"{"kty":"RSA","n":"\#(n)","e":"AQAB"}"#)
        #expect(throws: JOSEError.keyAlgorithmMismatch(reason: "RSA keys shorter than 2048 bits are refused (this one: 1024)")) { try key.check(for: .rs256) }
    }

    @Test func publicKeysCannotSign() throws {
        let key = try JWK(object: Vectors.named("ES256").public_jwk!)
        #expect(throws: JOSEError.keyAlgorithmMismatch(reason: "a public key cannot sign")) { try JWS.sign(payload: [1], with: key, algorithm: .es256) }
    }

    /// A bounded randomized fuzz of the compact and JWK parsers: mutated and random inputs must
    /// produce a typed error or a valid result, never a crash. Seeded, so a failure is reproducible.
    @Test func parsersSurviveMutatedInput() throws {
        var generator = SplitMix64(seed: 0x5EED_2026)
        let keys = JWKSet(keys: try Vectors.all.map { try JWK(object: $0.public_jwk ?? $0.private_jwk) })
        let seeds = Vectors.all.map(\.token) + JWEVectors.all.map(\.token)
        let decryptionKeys = JWKSet(keys: try JWEVectors.all.map { try JWK(object: $0.private_jwk) })
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/{}\":,[]".utf8)
        var verified = 0
        for round in 0..<4000 {
            var bytes = Array(seeds[round % seeds.count].utf8)
            for _ in 0..<(1 + Int(generator.next() % 4)) {
                let position = Int(generator.next() % UInt64(max(1, bytes.count)))
                switch generator.next() % 3 {
                case 0 where !bytes.isEmpty: bytes[position] = alphabet[Int(generator.next() % UInt64(alphabet.count))]
                case 1 where !bytes.isEmpty: bytes.remove(at: position)
                default: bytes.insert(alphabet[Int(generator.next() % UInt64(alphabet.count))], at: min(position, bytes.count))
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if let jws = try? JWS.parse(text), (try? jws.verify(with: keys)) != nil { verified += 1 }
            if let jwe = try? JWE.parse(text), (try? jwe.decrypt(with: decryptionKeys)) != nil { verified += 1 }
            _ = try? JWK(json: bytes)
            _ = try? JWKSet(json: bytes)
        }
        // Mutations almost never keep a valid signature; a handful may land in ignored base64 bits.
        #expect(verified < 30)
    }
}

/// A small deterministic generator for the fuzz test.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite(.tags(.fast)) struct KeyGenerationTests {
    @Test(arguments: JWSAlgorithm.allCases)
    func generatedKeysSignAndTheirPublicHalfVerifies(algorithm: JWSAlgorithm) async throws {
        let key = try await TestKeys.generatedOffThePool(for: algorithm, keyID: "gen-\(algorithm.rawValue)")
        #expect(key.isPrivate && key.algorithm == algorithm.rawValue && key.keyID == "gen-\(algorithm.rawValue)")
        let token = try JWS.sign(payload: Array("{}".utf8), with: key, algorithm: algorithm)
        let verifier = try key.publicJSON().map { try JWK(object: $0) } ?? key
        #expect(!verifier.isPrivate || algorithm.keyType == .oct)
        try JWS.parse(token).verify(with: verifier)
        if algorithm.keyType != .rsa {  // RSA generation is slow; one key per algorithm is enough there
            #expect(try JWK.generate(for: algorithm).thumbprint() != key.thumbprint())
        }
    }
}
