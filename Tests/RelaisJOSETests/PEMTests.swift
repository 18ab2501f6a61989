import RelaisJOSE
import Testing

@Suite struct PEMTests {
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
