import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

/// OpenSSL keeps an error queue per thread, and Relais verifies tokens on shared event-loop
/// threads: an operation that fails (or tries one format, then another) and leaves its errors
/// queued makes a later, unrelated failure on that thread report a stale reason, and the queue
/// grows. Every row runs an operation, failing or not, then checks the thread's queue is empty.
/// The tests are synchronous, so the operation and the check run on one thread.
@Suite(.tags(.fast)) struct OpenSSLErrorQueueTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let operation: @Sendable () throws -> Void
        init(_ name: String, _ operation: @escaping @Sendable () throws -> Void) {
            self.name = name
            self.operation = operation
        }
        var testDescription: String { name }
    }

    @Test("the thread's OpenSSL error queue is left empty", arguments: rows)
    func leavesTheQueueEmpty(_ row: Row) {
        OpenSSLErrorQueue.clear()
        _ = try? row.operation()
        #expect(OpenSSLErrorQueue.drain() == [], "\(row.name)")
    }

    static func pem(_ label: String, _ body: String) -> String { "-----BEGIN \(label)-----\n\(body)\n-----END \(label)-----\n" }

    static func offCurveEC() -> [String: JSONValue] {
        [
            "kty": .string("EC"), "crv": .string("P-256"), "x": .string(Base64URL.encode([UInt8](repeating: 1, count: 32))),
            "y": .string(Base64URL.encode([UInt8](repeating: 2, count: 32))),
        ]
    }

    /// The joserfc vectors' key for `algorithm`.
    static func vectorKey(_ algorithm: JWSAlgorithm) throws -> JWK { try JWK(object: Vectors.named(algorithm.rawValue).private_jwk) }

    /// Another key that suits `algorithm`, made once per family (RSA generation is slow).
    static func otherKey(_ algorithm: JWSAlgorithm) throws -> JWK {
        switch algorithm.keyType {
        case .rsa: try otherRSA.get()
        case .oct: JWK(symmetric: Array(repeating: 7, count: 64))
        default: try JWK.generate(for: algorithm, pinAlgorithm: false)
        }
    }
    private static let otherRSA = Result { () throws(JOSEError) in try JWK.generate(for: .rs256, use: nil, pinAlgorithm: false) }

    /// The vectors' key for `algorithm`, without `alg`, `use` and `kid`: for encryption too.
    static func unpinned(_ algorithm: JWSAlgorithm) throws -> JWK {
        try JWK(object: Vectors.named(algorithm.rawValue).private_jwk.filter { !["alg", "use", "kid"].contains($0.key) })
    }

    /// A token signed by `algorithm`, its signature's byte at the middle flipped.
    static func tampered(_ algorithm: JWSAlgorithm, key: JWK) throws -> JWS {
        let token = try JWS.sign(payload: Array("{}".utf8), with: key, algorithm: algorithm)
        let dot = token.lastIndex(of: ".")!
        var signature = Base64URL.decode(String(token[token.index(after: dot)...]))!
        signature[signature.count / 2] ^= 0x5A
        return try JWS.parse(String(token[...dot]) + Base64URL.encode(signature))
    }

    /// A token signed by `algorithm` whose signature is replaced by `signature`.
    static func resigned(_ algorithm: JWSAlgorithm, key: JWK, _ signature: [UInt8]) throws -> JWS {
        let token = try JWS.sign(payload: Array("{}".utf8), with: key, algorithm: algorithm)
        return try JWS.parse(String(token[...token.lastIndex(of: ".")!]) + Base64URL.encode(signature))
    }

    static let rows: [Row] = pemRows + keyRows + signatureRows + encryptionRows

    static let pemRows: [Row] = [
        Row("garbage PUBLIC KEY PEM") { _ = try JWK(pem: pem("PUBLIC KEY", "AAAA")) },
        Row("garbage PRIVATE KEY PEM") { _ = try JWK(pem: pem("PRIVATE KEY", "AAAA")) },
        Row("garbage CERTIFICATE PEM") { _ = try JWK(pem: pem("CERTIFICATE", "AAAA")) },
        Row("no PEM at all") { _ = try JWK(pem: "not a key") },
        Row("SEC1 EC private key") { _ = try JWK(pem: PEMFixtures.sec1) },
        Row("PKCS#1 RSA private key") { _ = try JWK(pem: PEMFixtures.pkcs1) },
        Row("certificate") { _ = try JWK(pem: PEMFixtures.certificate) },
        Row("secp256k1 key (unsupported curve)") { _ = try JWK(pem: PEMFixtures.secp256k1) },
        Row("X25519 key (unsupported type)") { _ = try JWK(pem: PEMFixtures.x25519) },
        Row("PKCS#8 and SPKI of each key type") {
            for algorithm in [JWSAlgorithm.rs256, .es256, .es384, .es512, .edDSA] {
                let key = try vectorKey(algorithm)
                _ = try JWK(pem: key.privateKeyPEM()!)
                _ = try JWK(pem: key.publicKeyPEM()!)
            }
        },
    ]

    static let keyRows: [Row] = [
        Row("EC JWK with a point off the curve") { _ = try JWK(object: offCurveEC()) },
        Row("RSA JWK whose d is not its n's") {
            var rsa = Vectors.named("RS256").private_jwk
            var d = Base64URL.decode(rsa["d"]!.stringValue!)!
            d[d.count - 1] ^= 0x02
            rsa["d"] = .string(Base64URL.encode(d))
            _ = try JWK(object: rsa)
        },
        Row("EC JWK whose d is not its point's") {
            var ec = Vectors.named("ES256").private_jwk
            ec["d"] = .string(Base64URL.encode(Array(repeating: 0, count: 31) + [1]))
            _ = try JWK(object: ec)
        },
        Row("Ed25519 JWK whose x is not its d's") {
            var mismatched = Vectors.named("EdDSA").private_jwk
            mismatched["x"] = .string(Base64URL.encode(Array(repeating: UInt8(9), count: 32)))
            _ = try JWK(object: mismatched)
        },
        Row("each vector's private JWK") {
            for vector in Vectors.all { _ = try JWK(object: vector.private_jwk) }
        },
        Row("public JWKs of each key type, and their thumbprints") {
            for algorithm in JWSAlgorithm.allCases {
                let key = try vectorKey(algorithm)
                _ = key.thumbprint()
                if let object = key.publicJSON() { _ = try JWK(object: object).thumbprint() }
            }
        },
    ]

    static let signatureRows: [Row] =
        JWSAlgorithm.allCases.map { algorithm in
            Row("\(algorithm.rawValue): a tampered signature") {
                let key = try vectorKey(algorithm)
                try tampered(algorithm, key: key).verify(with: key)
            }
        }
        + JWSAlgorithm.allCases.filter { !$0.isSymmetric }.map { algorithm in
            Row("\(algorithm.rawValue): signed by another key, verified with the public key") {
                let signer = try vectorKey(algorithm)
                let other = try JWK(object: try otherKey(algorithm).publicJSON()!)
                try JWS.parse(try JWS.sign(payload: Array("{}".utf8), with: signer, algorithm: algorithm)).verify(with: other)
            }
        }
        + [
            ("ES256: r = s = 0", JWSAlgorithm.es256, UInt8(0), 64), ("ES256: r and s above the order", .es256, 0xFF, 64),
            ("RS256: a signature above the modulus", .rs256, 0xFF, 256), ("PS256: a signature above the modulus", .ps256, 0xFF, 256),
            ("EdDSA: a signature of zeros", .edDSA, 0, 64),
        ].map { name, algorithm, byte, count in
            Row(name) {
                let key = try vectorKey(algorithm)
                try resigned(algorithm, key: key, [UInt8](repeating: byte, count: count)).verify(with: key)
            }
        } + [
            Row("sign with each algorithm") {
                for algorithm in JWSAlgorithm.allCases {
                    _ = try JWS.sign(payload: Array("{}".utf8), with: try vectorKey(algorithm), algorithm: algorithm)
                    _ = try JWS.sign(payload: Array("{}".utf8), with: try otherKey(algorithm), algorithm: algorithm)
                }
            }
        ]

    static let encryptionRows: [Row] = [
        Row("RSA-OAEP-256 to another key") {
            let recipient = try JWK(object: try otherKey(.rs256).publicJSON()!)
            let other = try unpinned(.rs256)
            let token = try JWE.encrypt(Array("x".utf8), to: recipient, keyAlgorithm: .rsaOAEP256, contentAlgorithm: .a256GCM)
            _ = try JWE.parse(token).decrypt(with: other)
        },
        Row("RSA-OAEP to another key") {
            let recipient = try JWK(object: try otherKey(.rs256).publicJSON()!)
            let other = try unpinned(.rs256)
            let token = try JWE.encrypt(Array("x".utf8), to: recipient, keyAlgorithm: .rsaOAEP, contentAlgorithm: .a128CBCHS256)
            _ = try JWE.parse(token).decrypt(with: other)
        },
        Row("ECDH-ES+A128KW to another key") {
            let recipient = try JWK.generate(for: .es256, use: "enc", pinAlgorithm: false)
            let other = try JWK.generate(for: .es256, use: "enc", pinAlgorithm: false)
            let token = try JWE.encrypt(Array("x".utf8), to: recipient, keyAlgorithm: .ecdhESA128KW, contentAlgorithm: .a256GCM)
            _ = try JWE.parse(token).decrypt(with: other)
        },
        Row("ECDH-ES to another key (A256GCM tag)") {
            let recipient = try JWK.generate(for: .es256, use: "enc", pinAlgorithm: false)
            let other = try JWK.generate(for: .es256, use: "enc", pinAlgorithm: false)
            let token = try JWE.encrypt(Array("x".utf8), to: recipient, keyAlgorithm: .ecdhES, contentAlgorithm: .a256GCM)
            _ = try JWE.parse(token).decrypt(with: other)
        },
        Row("A256KW with another key") {
            let token = try JWE.encrypt(Array("x".utf8), to: JWK(symmetric: SecureRandom.bytes(32)), keyAlgorithm: .a256KW, contentAlgorithm: .a256CBCHS512)
            _ = try JWE.parse(token).decrypt(with: JWK(symmetric: SecureRandom.bytes(32)))
        },
        Row("ECDH-ES with an ephemeral key off the curve") {
            let recipient = try JWK.generate(for: .es256, use: "enc", pinAlgorithm: false)
            let token = try JWE.encrypt(Array("x".utf8), to: recipient, keyAlgorithm: .ecdhES, contentAlgorithm: .a256GCM)
            var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            var header = JSONValue.object(from: Base64URL.decode(parts[0])!)!
            header["epk"] = .object(offCurveEC())
            parts[0] = Base64URL.encode(JSONValue.object(header).serialized())
            _ = try JWE.parse(parts.joined(separator: ".")).decrypt(with: recipient)
        },
    ]
}

/// Keys in the formats OpenSSL reads by trying one decoder after another (made with the openssl
/// command: `ecparam -genkey`, `genrsa -traditional 1024`, `genpkey -algorithm X25519`, `req -x509`).
enum PEMFixtures {
    static let sec1 = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEICyurpNJuHqb6DCLRsgSljEgZ/euqALOJoC5Rs14pQGZoAoGCCqGSM49
        AwEHoUQDQgAExXyCynoQ8JrRsajpaE74uxECmSLznr1ySMUxVteY9StV7ZQs6fkT
        V1rZ+vqzc6wlEI0czICoXBkkSWa6WLcnUA==
        -----END EC PRIVATE KEY-----
        """
    static let pkcs1 = """
        -----BEGIN RSA PRIVATE KEY-----
        MIICXAIBAAKBgQC9rmHKGtouItX4uf2SSQDWl1NHuc0QzM53qh44OhNjR5Zj7UI6
        Eq7E2HXgbNeG16SbpbdIzJM02U1zyci/GcJh+6VgPDqz5l1bxfkkUvCqu8aQ8TIL
        Vpf+6GTWjnfJmbIeOZtuA/4ZZuHh8bBUQIlyrTIUJ6ZvQMHyyosH9VGJewIDAQAB
        AoGAOd1t9bL1Zme4MPXEdpEQ0WY+wL3c4kgooHbkWzDUY1AegAOMVZ0HdgO3Ci0K
        HxfAHr+SR4IpUlEMgMtJE4tvMeBIbb4sId8XRwVuNQGzePE89tFJI1leGahHu4rc
        6JgYLZEasaRU8g610+WOPb2Iy+glvlxEiDs7gqjjvIRo0lkCQQDr9MHWAiEeBIJM
        2D9UezlaWh1zRLa8xDPiamPvxnuPglvBJGLVIqmLQJ0Q+933+nbkq/PvQ3Rx6z1P
        Mt7/BQpPAkEAzctNjpHLYCRtMHxZ8EChBFYUvExbcd8f7My5psrEYPcnxqic8uy3
        z4tDX+2xvM21ADcQgk7r6BRjtQ/ZD23/FQJBAKcWrsDmxx7joIXcSJSBoi6aS+qZ
        iTIJWpiGMHjWPB9295TBOH+nyRoESnWBdkEpi1IJdndDdE1LgSH5azJ6Fj8CQFxC
        ibmh6SBoFD+JcDTCdK1h/hfQz6pEUqaxvYVmIBYsl7t7Oim6MEmucH0gLe+r9Tps
        dU1GHoLEKVMyEKjXMmUCQG+1lVheypPgfbvaVMz8iDgP4MzDjueg3AII6+iWYeim
        3C0U5c2AVwMQO5AaBuEK+/0I+eoqcH97IMBSBBbparc=
        -----END RSA PRIVATE KEY-----
        """
    static let secp256k1 = """
        -----BEGIN EC PRIVATE KEY-----
        MHQCAQEEIP3g+alY9RnMc4HiYiNkkairb83qIvS5o1d1ZQ5iuYvZoAcGBSuBBAAK
        oUQDQgAE330mD8ok8LxXzUuLU+HY2XgATGMvOgctm7hebXBLdMaFOTAB7OG5Wcfd
        gCkFFwYEpQdvGM3TJ+V1zKzhfPW2Hw==
        -----END EC PRIVATE KEY-----
        """
    static let x25519 = """
        -----BEGIN PRIVATE KEY-----
        MC4CAQAwBQYDK2VuBCIEIAAdCksMecRdq9G/T4HlNF+EBm6zhWzspPnF+oLNOxJV
        -----END PRIVATE KEY-----
        """
    static let certificate = """
        -----BEGIN CERTIFICATE-----
        MIIBbTCCAROgAwIBAgIUdmxIuQMdoBjun3dQ/Osx7KEAttAwCgYIKoZIzj0EAwIw
        DDEKMAgGA1UEAwwBdDAeFw0yNjExMjcxNzIyMTBaFw0zNjExMjQxNzIyMTBaMAwx
        CjAIBgNVBAMMAXQwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATFfILKehDwmtGx
        qOloTvi7EQKZIvOevXJIxTFW15j1K1XtlCzp+RNXWtn6+rNzrCUQjRzMgKhcGSRJ
        ZrpYtydQo1MwUTAdBgNVHQ4EFgQUBespeZPHAtoYGcRgI+X00VvboMEwHwYDVR0j
        BBgwFoAUBespeZPHAtoYGcRgI+X00VvboMEwDwYDVR0TAQH/BAUwAwEB/zAKBggq
        hkjOPQQDAgNIADBFAiEA4uF3g3qf7SBtHPdJJR6fkKxQXSSGTFLOJ+M7GJDsZKMC
        IEOLBE9e7Fji44LCnCc//P6nwbsJJHQu46gmn1VJZXbk
        -----END CERTIFICATE-----
        """
}
