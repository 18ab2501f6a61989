import RelaisJOSE
import RelaisTestSupport
import Testing

@Suite(.tags(.fast)) struct PEMTests {
    static let asymmetric = Vectors.all.filter { $0.pem != nil }

    @Test(arguments: asymmetric)
    func everyPEMFormOfAKeyIsTheSameKeyAsItsJWK(vector: Vector) throws {
        let forms = try #require(vector.pem)
        let algorithm = try #require(JWSAlgorithm(rawValue: vector.alg))
        for (form, pem) in forms {
            let key = try JWK(pem: pem, keyID: "pem-\(form)")
            #expect(key.thumbprint() == vector.thumbprint, "\(form)")
            #expect(key.isPrivate == (form == "pkcs8" || form == "traditional"), "\(form)")
            // The PEM public key verifies joserfc's token.
            try JWS.parse(vector.token).verify(with: key)
            if key.isPrivate {
                let token = try JWS.sign(payload: [1, 2, 3], with: key, algorithm: algorithm)
                try JWS.parse(token).verify(with: JWK(object: vector.public_jwk!))
            }
        }
    }

    @Test(arguments: [JWSAlgorithm.rs256, .es384, .edDSA])
    func exportedPEMReimportsAsTheSameKey(algorithm: JWSAlgorithm) throws {
        let key = try JWK.generate(for: algorithm)
        let privatePEM = try #require(key.privateKeyPEM())
        #expect(privatePEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reimported = try JWK(pem: privatePEM)
        #expect(reimported.isPrivate && reimported.thumbprint() == key.thumbprint())
        let publicPEM = try #require(key.publicKeyPEM())
        let publicKey = try JWK(pem: publicPEM)
        #expect(!publicKey.isPrivate && publicKey.thumbprint() == key.thumbprint())
        #expect(publicKey.privateKeyPEM() == nil)
        #expect(JWK(symmetric: [1, 2, 3]).privateKeyPEM() == nil)
    }

    @Test func garbageAndEncryptedPEMAreRefused() {
        #expect(throws: JOSEError.invalidKey(reason: "not a PEM private key, public key or certificate")) {
            try JWK(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
        }
        #expect(throws: JOSEError.invalidKey(reason: "not a PEM private key, public key or certificate")) { try JWK(pem: "hello") }
        #expect(throws: JOSEError.invalidKey(reason: "encrypted PEM private keys are not supported; decrypt it first")) {
            try JWK(pem: "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")
        }
    }
}
