import Foundation
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

struct JWEVector: Decodable, Sendable, CustomTestStringConvertible {
    let alg: String
    let enc: String
    let private_jwk: [String: JSONValue]
    let plaintext: String
    let token: String
    var testDescription: String { "\(alg) \(enc)" }
}

struct NestedVector: Decodable, Sendable {
    let alg: String
    let decryption_jwk: [String: JSONValue]
    let signing_public_jwk: [String: JSONValue]
    let claims: String
    let token: String
}

enum JWEVectors {
    struct File: Decodable {
        let vectors: [JWEVector]
        let nested: [NestedVector]
    }
    static let file: File = {
        let url = Bundle.module.url(forResource: "Vectors/jwe", withExtension: "json")!
        return try! JSONDecoder().decode(File.self, from: Data(contentsOf: url))
    }()
    static var all: [JWEVector] { file.vectors }
}

@Suite(.tags(.fast)) struct JWETests {
    private func recipient(_ vector: JWEVector) throws -> (privateKey: JWK, publicKey: JWK) {
        let privateKey = try JWK(object: vector.private_jwk)
        let publicKey = try privateKey.publicJSON().map { try JWK(object: $0) } ?? privateKey
        return (privateKey, publicKey)
    }

    @Test(arguments: JWEVectors.all)
    func tokensEncryptedByJoserfcDecrypt(vector: JWEVector) throws {
        let jwe = try JWE.parse(vector.token)
        #expect(jwe.keyAlgorithm.rawValue == vector.alg && jwe.contentAlgorithm.rawValue == vector.enc)
        let decrypted = try jwe.decrypt(with: JWKSet(keys: [try recipient(vector).privateKey]))
        #expect(decrypted.plaintextString == vector.plaintext)
    }

    @Test(arguments: JWEVectors.all)
    func relaisEncryptsAndDecryptsEveryCombination(vector: JWEVector) throws {
        let (privateKey, publicKey) = try recipient(vector)
        let keyAlgorithm = try #require(JWEKeyAlgorithm(rawValue: vector.alg))
        let contentAlgorithm = try #require(JWEContentAlgorithm(rawValue: vector.enc))
        let token = try JWE.encrypt(Array("bonjour Zoé".utf8), to: publicKey, keyAlgorithm: keyAlgorithm, contentAlgorithm: contentAlgorithm)
        #expect(try JWE.parse(token).decrypt(with: privateKey).plaintextString == "bonjour Zoé")
    }

    @Test(arguments: JWEVectors.all)
    func anyTamperingFailsWithOneIndistinctError(vector: JWEVector) throws {
        let key = try recipient(vector).privateKey
        let parts = vector.token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        for index in [1, 2, 3, 4] where !parts[index].isEmpty {
            var bytes = Base64URL.decode(parts[index])!
            bytes[bytes.count / 2] ^= 0x01
            var forged = parts
            forged[index] = Base64URL.encode(bytes)
            #expect(throws: JOSEError.decryptionFailed, "segment \(index)") { try JWE.parse(forged.joined(separator: ".")).decrypt(with: key) }
        }
        // The protected header is the AAD: changing it (here, adding a member) breaks the tag.
        var header = JSONValue.object(from: Base64URL.decode(parts[0])!)!
        header["x"] = .string("y")
        var forged = parts
        forged[0] = Base64URL.encode(JSONValue.object(header).serialized())
        #expect(throws: JOSEError.decryptionFailed) { try JWE.parse(forged.joined(separator: ".")).decrypt(with: key) }
    }

    @Test func nestedFranceConnectPlusTokensDecryptThenVerify() throws {
        for vector in JWEVectors.file.nested {
            let decrypted = try JWE.parse(vector.token).decrypt(with: JWKSet(keys: [try JWK(object: vector.decryption_jwk)]))
            #expect(decrypted.isNestedJWT)
            let jws = try JWS.parse(decrypted.plaintextString)
            try jws.verify(with: JWKSet(keys: [try JWK(object: vector.signing_public_jwk)]))
            #expect(String(decoding: jws.payload, as: UTF8.self) == vector.claims)
        }
    }

    @Test func theDecryptionKeyIsChosenByKidDuringRotation() throws {
        let old = try JWK.generateForTests(kid: "enc-2025")
        let new = try JWK.generateForTests(kid: "enc-2026")
        let keys = JWKSet(keys: [old, new])
        for key in [old, new] {
            let token = try JWE.encrypt([1, 2, 3], to: try JWK(object: key.publicJSON()!), keyAlgorithm: .ecdhES, contentAlgorithm: .a256GCM)
            #expect(try JWE.parse(token).decrypt(with: keys).key.keyID == key.keyID)
        }
        let unknown = try JWE.encrypt([1], to: try JWK.generateForTests(kid: "stranger").publicOnly(), keyAlgorithm: .ecdhES, contentAlgorithm: .a256GCM)
        #expect(throws: JOSEError.noMatchingKey(reason: "no ECDH-ES decryption key with kid 'stranger'")) { try JWE.parse(unknown).decrypt(with: keys) }
    }

    @Test func wrongKeysAndShapesAreRefused() throws {
        let ecVector = JWEVectors.all.first { $0.alg == "ECDH-ES" && $0.enc == "A256GCM" }!
        let rsaVector = JWEVectors.all.first { $0.alg == "RSA-OAEP-256" && $0.enc == "A256GCM" }!
        let rsaKey = try JWK(object: rsaVector.private_jwk)
        #expect(throws: JOSEError.keyAlgorithmMismatch(reason: "ECDH-ES needs a EC key, this one is RSA")) { try JWE.parse(ecVector.token).decrypt(with: rsaKey) }
        // Another RSA key: the unwrap fails, and the failure looks exactly like a bad tag.
        let foreign = try JWK.generate(for: .rs256, use: "enc", pinAlgorithm: false)
        #expect(throws: JOSEError.decryptionFailed) { try JWE.parse(rsaVector.token).decrypt(with: foreign) }
        #expect(throws: JOSEError.keyAlgorithmMismatch(reason: "a public key cannot decrypt")) {
            try JWE.parse(rsaVector.token).decrypt(with: try JWK(object: rsaKey.publicJSON()!))
        }
        #expect(throws: JOSEError.malformedToken(reason: "this is a JWS (3 segments), not a JWE")) { try JWE.parse("a.b.c") }
        let zipHeader = Base64URL.encode(Array(#"{"alg":"dir","enc":"A128GCM","zip":"DEF"}"#.utf8))
        #expect(throws: JOSEError.unsupportedAlgorithm("zip")) { try JWE.parse("\(zipHeader)..AAAA.AAAA.AAAA") }
        let rsa15 = Base64URL.encode(Array(#"{"alg":"RSA1_5","enc":"A128GCM"}"#.utf8))
        #expect(throws: JOSEError.unsupportedAlgorithm("RSA1_5")) { try JWE.parse("\(rsa15).AAAA.AAAA.AAAA.AAAA") }
        // An ephemeral key off the curve is refused before any derivation.
        var parts = ecVector.token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var header = JSONValue.object(from: Base64URL.decode(parts[0])!)!
        var epk = header["epk"]!.objectValue!
        var y = Base64URL.decode(epk["y"]!.stringValue!)!
        y[31] ^= 0x01
        epk["y"] = .string(Base64URL.encode(y))
        header["epk"] = .object(epk)
        parts[0] = Base64URL.encode(JSONValue.object(header).serialized())
        #expect(throws: JOSEError.decryptionFailed) { try JWE.parse(parts.joined(separator: ".")).decrypt(with: try JWK(object: ecVector.private_jwk)) }
    }
}

extension JWK {
    static func generateForTests(kid: String) throws -> JWK {
        try JWK.generate(for: .es256, keyID: kid, use: "enc", pinAlgorithm: false)
    }

    func publicOnly() throws -> JWK { try JWK(object: publicJSON()!) }
}
