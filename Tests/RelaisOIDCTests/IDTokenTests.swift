import RelaisConfig
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisOIDC

private let idTokenRejected = "provider_id_token_rejected"

private func refused(_ check: String, mentioning mention: String? = nil) -> Expected {
    .refused(idTokenRejected, check: check, mentioning: mention)
}

extension Case {
    /// Each claim and header of the default id_token wrong in turn, beside the nearest accepted variant.
    static let idTokenChecks: [Case] = [
        Case("the default token", .accepted) { _ in },
        Case("iss other", refused("jwt_iss")) { $0.idToken.claims["iss"] = .string("https://elsewhere.example/api/v2") },
        Case("iss missing", refused("jwt_iss")) { $0.idToken.claims["iss"] = nil },
        Case("iss with a trailing slash", refused("jwt_iss")) { $0.idToken.claims["iss"] = .string($0.issuer + "/") },
        Case("aud other", refused("jwt_aud")) { $0.idToken.claims["aud"] = .string("another-client") },
        Case("aud array without our client_id", refused("jwt_aud")) { $0.idToken.claims["aud"] = .array([.string("a"), .string("b")]) },
        Case("aud array with ours and no azp", refused("jwt_azp")) {
            $0.idToken.claims["aud"] = .array([.string(TestKeys.clientID), .string("b")])
        },
        Case("aud array with ours and azp ours", .accepted) {
            $0.idToken.claims["aud"] = .array([.string(TestKeys.clientID), .string("b")])
            $0.idToken.claims["azp"] = .string(TestKeys.clientID)
        },
        Case("exp 31 s past (beyond the leeway)", refused("jwt_exp")) { $0.advance = .seconds(60 + 31) },
        Case("exp 29 s past (within the leeway)", .accepted) { $0.advance = .seconds(60 + 29) },
        Case("exp missing", refused("jwt_exp")) { $0.idToken.claims["exp"] = nil },
        Case("exp not a number", refused("jwt_exp")) { $0.idToken.claims["exp"] = .string("tomorrow") },
        Case("iat missing", refused("jwt_iat")) { $0.idToken.claims["iat"] = nil },
        Case("iat 31 s ahead (beyond the leeway)", refused("jwt_iat")) { $0.idToken.claims["iat"] = .number($0.now + 31) },
        Case("iat 29 s ahead (within the leeway)", .accepted) { $0.idToken.claims["iat"] = .number($0.now + 29) },
        Case("nbf ahead", refused("jwt_nbf")) { $0.idToken.claims["nbf"] = .number($0.now + 45) },
        Case("nonce other", refused("jwt_nonce")) { $0.idToken.claims["nonce"] = .string("nonce-2") },
        Case("nonce missing", refused("jwt_nonce")) { $0.idToken.claims["nonce"] = nil },
        Case("sub missing", refused("jwt_required", mentioning: "'sub'")) { $0.idToken.claims["sub"] = nil },
        // OIDC Core §3.1.3.8: at_hash is optional in the code flow, but checked when present.
        Case("at_hash of the access token", .accepted) { $0.idToken.claims["at_hash"] = .string(AccessTokenHash.sha256Half) },
        Case("at_hash of another access token", refused("jwt_at_hash", mentioning: "does not match")) {
            $0.idToken.claims["at_hash"] = .string(AccessTokenHash.sha256Half)
            $0.tokenFields["access_token"] = .string("access-2")
        },
        Case("at_hash not a string", refused("jwt_at_hash", mentioning: "not a string")) { $0.idToken.claims["at_hash"] = .number(1) },
        Case("at_hash null", refused("jwt_at_hash", mentioning: "not a string")) { $0.idToken.claims["at_hash"] = .null },
        Case("at_hash empty", refused("jwt_at_hash", mentioning: "does not match")) { $0.idToken.claims["at_hash"] = .string("") },
        Case("at_hash with base64 padding", refused("jwt_at_hash", mentioning: "does not match")) {
            $0.idToken.claims["at_hash"] = .string(AccessTokenHash.sha256Half + "==")
        },
        Case("at_hash of SHA-256 in an ES384 token", refused("jwt_at_hash", mentioning: "does not match")) {
            $0.settings.idTokenAlgorithms = [.es384]
            $0.idToken.algorithm = .es384
            $0.idToken.claims["at_hash"] = .string(AccessTokenHash.sha256Half)
        },
        Case("at_hash in an encrypted id_token, the nested JWS's alg", .accepted) {
            $0.idToken.shape = .encrypted(.init())
            $0.idToken.claims["at_hash"] = .string(AccessTokenHash.sha256Half)
        },
        Case("acr below the requested level", refused("jwt_acr", mentioning: "below")) { $0.idToken.claims["acr"] = .string("eidas1") },
        Case("acr missing while a level is requested", refused("jwt_acr", mentioning: "missing")) { $0.idToken.claims["acr"] = nil },
        Case("acr not a known level", refused("jwt_acr", mentioning: "not a known level")) { $0.idToken.claims["acr"] = .string("eidas9") },
        Case("acr above the requested level", .accepted) { $0.idToken.claims["acr"] = .string("eidas3") },
        // No acr_order configured (an `oidc` provider with acr_values only): no scale to compare
        // on, so the id_token must name a level that was asked for, exactly, never none.
        Case("acr asked, no acr_order: the level asked", .accepted) { $0.settings.acrOrder = [] },
        Case("acr asked, no acr_order: another level", refused("jwt_acr")) {
            $0.settings.acrOrder = []
            $0.idToken.claims["acr"] = .string("eidas3")
        },
        Case("acr asked, no acr_order: none", refused("jwt_acr", mentioning: "missing")) {
            $0.settings.acrOrder = []
            $0.idToken.claims["acr"] = nil
        },
        Case("acr below, but no level requested", .accepted) {
            $0.requestedACR = nil
            $0.idToken.claims["acr"] = .string("eidas1")
        },
        Case("crit naming an unknown header", refused("jose_unsupported_crit")) {
            $0.idToken.header["crit"] = .array([.string("x-unknown")])
            $0.idToken.header["x-unknown"] = .bool(true)
        },
        Case("crit not an array", refused("jose_malformed", mentioning: "crit")) { $0.idToken.header["crit"] = .string("exp") },
        Case("kid not a string", refused("jose_malformed", mentioning: "kid")) {
            // Signed with the client secret: a key without a kid of its own leaves the header's in place.
            $0.settings.idTokenAlgorithms = [.hs256]
            $0.idToken.algorithm = .hs256
            $0.idToken.header["kid"] = .number(1)
        },
        // Without the provider's keys the token cannot be verified: refused, reported as
        // jose_jwks_unavailable (not as provider_unavailable, even for a 5xx).
        Case("JWKS answering 503", refused("jose_jwks_unavailable")) { $0.jwksStatus = 503 },
        Case("no jwks_uri in discovery", refused("jose_jwks_unavailable")) { $0.discovery["jwks_uri"] = nil },
        Case("signed by an unpublished key", refused("jose_no_matching_key")) { $0.idToken.signer = TestKeys.stranger },
        Case("signed by another key under a published kid", refused("jose_invalid_signature")) { $0.idToken.signer = TestKeys.impostor },
        Case("payload changed after signing", refused("jose_invalid_signature")) { $0.idToken.shape = .tampered },
        Case("alg none", refused("jose_unsupported_alg", mentioning: "'none'")) { $0.idToken.shape = .unsigned },
        Case("alg ES384, not configured", refused("jose_unsupported_alg", mentioning: "'ES384'")) { $0.idToken.algorithm = .es384 },
        Case("HS256 with the client secret, configured", .accepted) {
            $0.settings.idTokenAlgorithms = [.es256, .hs256]
            $0.idToken.algorithm = .hs256
        },
        Case("HS256 with the client secret, not configured", refused("jose_unsupported_alg", mentioning: "'HS256'")) {
            $0.idToken.algorithm = .hs256
        },
        Case("HS256 with another secret", refused("jose_invalid_signature")) {
            $0.settings.idTokenAlgorithms = [.hs256]
            $0.idToken.algorithm = .hs256
            $0.idToken.signer = JWK(symmetric: Array(String(repeating: "other-", count: 11).utf8))
        },
        Case("HS256 keyed with the provider's public RSA key (alg confusion)", refused("jose_invalid_signature")) {
            $0.settings.idTokenAlgorithms = [.rs256, .hs256]
            $0.idToken.algorithm = .hs256
            $0.idToken.signer = JWK(symmetric: JSONValue.object(TestKeys.rsa.publicJSON() ?? [:]).serialized())
        },
        Case("HS256 configured without a client secret", refused("jose_key_alg_mismatch")) {
            $0.settings.idTokenAlgorithms = [.hs256]
            $0.settings.clientSecret = nil
            $0.idToken.algorithm = .hs256
        },
    ]

    /// FranceConnect+ id_tokens: a signed JWT encrypted to one of our keys.
    static let encryptedIDTokens: [Case] = [
        Case("RSA-OAEP-256, A256GCM", .accepted) { $0.idToken.shape = .encrypted(.init()) },
        Case("RSA-OAEP, A128CBC-HS256", .accepted) { $0.idToken.shape = .encrypted(.init(keyAlgorithm: .rsaOAEP, contentAlgorithm: .a128CBCHS256)) },
        Case("ECDH-ES, A256GCM", .accepted) { $0.idToken.shape = .encrypted(.init(keyAlgorithm: .ecdhES, recipient: TestKeys.encryptionEC)) },
        Case("ECDH-ES+A256KW, A256GCM", .accepted) {
            $0.idToken.shape = .encrypted(.init(keyAlgorithm: .ecdhESA256KW, recipient: TestKeys.encryptionEC))
        },
        Case("encrypted to another key under our kid", refused("jose_decryption_failed")) {
            $0.idToken.shape = .encrypted(.init(recipient: TestKeys.foreignRSA))
        },
        Case("encrypted to a kid we do not hold", refused("jose_no_matching_key")) {
            $0.idToken.shape = .encrypted(.init(keyAlgorithm: .ecdhES, recipient: TestKeys.stranger))
        },
        Case("no decryption key configured", refused("jose_no_matching_key")) {
            $0.settings.decryptionKeys = []
            $0.idToken.shape = .encrypted(.init())
        },
        Case("ciphertext tampered", refused("jose_decryption_failed")) { $0.idToken.shape = .encrypted(.init(tampered: true)) },
        Case("encrypted, as require_encrypted_id_token asks", .accepted) {
            $0.settings.requireEncryptedIDToken = true
            $0.idToken.shape = .encrypted(.init())
        },
        Case("only signed when require_encrypted_id_token (a downgrade)", refused("jose_malformed", mentioning: "expected encrypted")) {
            $0.settings.requireEncryptedIDToken = true
        },
        Case("bare claims without cty", refused("jose_malformed", mentioning: "does not hold a signed JWT")) {
            $0.idToken.shape = .encrypted(.init(cty: nil, claimsOnly: true))
        },
        Case("cty JWT over bare claims", refused("jose_malformed", mentioning: "segments")) {
            $0.idToken.shape = .encrypted(.init(claimsOnly: true))
        },
        Case("nested JWT signed by an unpublished key", refused("jose_no_matching_key")) {
            $0.idToken.shape = .encrypted(.init())
            $0.idToken.signer = TestKeys.stranger
        },
        Case("nested JWT with another nonce", refused("jwt_nonce")) {
            $0.idToken.shape = .encrypted(.init())
            $0.idToken.claims["nonce"] = .string("nonce-2")
        },
    ]
}

@Suite struct IDTokenTests {
    /// Verifies the scenario's id_token the way a sign-in does, and checks the outcome.
    private func verify(_ row: Case) async throws {
        try await Harness.run(row.setup) { harness in
            let claims = await row.expected.verify { () async throws(UpstreamError) in try await harness.verifyIDToken() }
            if let claims { #expect(claims.subject == "user-1") }
        }
    }

    @Test("id_token checks", arguments: Case.idTokenChecks)
    func idToken(_ row: Case) async throws { try await verify(row) }

    @Test("encrypted id_token", arguments: Case.encryptedIDTokens)
    func encryptedIDToken(_ row: Case) async throws { try await verify(row) }

    @Test("each algorithm is accepted when configured", arguments: JWSAlgorithm.allCases)
    func acceptedWhenConfigured(_ algorithm: JWSAlgorithm) async throws {
        try await verify(
            Case(algorithm.rawValue, .accepted) {
                $0.settings.idTokenAlgorithms = [algorithm]
                $0.idToken.algorithm = algorithm
            })
    }

    /// SHA-256, SHA-384 or SHA-512 by `alg`; SHA-512 for EdDSA (Ed25519).
    @Test("at_hash is hashed as each algorithm says", arguments: JWSAlgorithm.allCases)
    func accessTokenHashPerAlgorithm(_ algorithm: JWSAlgorithm) async throws {
        let own = AccessTokenHash.expected(for: algorithm)
        try await verify(
            Case("\(algorithm.rawValue), its own hash", .accepted) {
                $0.settings.idTokenAlgorithms = [algorithm]
                $0.idToken.algorithm = algorithm
                $0.idToken.claims["at_hash"] = .string(own)
            })
        for other in [AccessTokenHash.sha256Half, AccessTokenHash.sha384Half, AccessTokenHash.sha512Half] where other != own {
            try await verify(
                Case("\(algorithm.rawValue), another hash", refused("jwt_at_hash")) {
                    $0.settings.idTokenAlgorithms = [algorithm]
                    $0.idToken.algorithm = algorithm
                    $0.idToken.claims["at_hash"] = .string(other)
                })
        }
    }

    @Test("each algorithm is refused when not configured", arguments: JWSAlgorithm.allCases)
    func refusedWhenNotConfigured(_ algorithm: JWSAlgorithm) async throws {
        try await verify(
            Case(algorithm.rawValue, refused("jose_unsupported_alg", mentioning: "'\(algorithm.rawValue)'")) {
                $0.settings.idTokenAlgorithms = JWSAlgorithm.allCases.filter { $0 != algorithm }
                $0.idToken.algorithm = algorithm
            })
    }
}
