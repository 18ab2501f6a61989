import RelaisJOSE
import Testing

@testable import RelaisOIDC

private func refused(_ check: String) -> Expected { .refused("provider_logout_token_rejected", check: check) }

extension Case {
    /// Back-channel logout tokens (OpenID Connect Back-Channel Logout 1.0 §2.6), each rule broken in turn.
    static let logoutTokens: [Case] = [
        Case("the default token (sub and sid)", .accepted) { _ in },
        Case("sid only", .accepted) { $0.logoutToken.claims["sub"] = nil },
        Case("sub only", .accepted) { $0.logoutToken.claims["sid"] = nil },
        Case("no typ", .accepted) { $0.logoutToken.header["typ"] = nil },
        Case("typ application/logout+jwt", .accepted) { $0.logoutToken.header["typ"] = .string("application/logout+jwt") },
        Case("typ JWT", refused("typ is 'jwt'")) { $0.logoutToken.header["typ"] = .string("JWT") },
        Case("events missing", refused("claim 'events' is missing")) { $0.logoutToken.claims["events"] = nil },
        Case("events without the back-channel logout member", refused("events has no")) {
            $0.logoutToken.claims["events"] = .object(["http://schemas.openid.net/event/other": .object([:])])
        },
        Case("events member not an object", refused("events has no")) {
            $0.logoutToken.claims["events"] = .object([UpstreamProvider.logoutEvent: .string("yes")])
        },
        Case("with a nonce", refused("must not carry a nonce")) { $0.logoutToken.claims["nonce"] = .string("nonce-1") },
        Case("an id_token", refused("jwt_required")) { $0.logoutToken = $0.idToken },
        Case("no jti", refused("claim 'jti' is missing")) { $0.logoutToken.claims["jti"] = nil },
        Case("jti not a string", refused("jti is not a string")) { $0.logoutToken.claims["jti"] = .number(42) },
        Case("jti empty", refused("jti is not a string")) { $0.logoutToken.claims["jti"] = .string("") },
        Case("neither sub nor sid", refused("neither sub nor sid")) {
            $0.logoutToken.claims["sub"] = nil
            $0.logoutToken.claims["sid"] = nil
        },
        Case("iss other", refused("jwt_iss")) { $0.logoutToken.claims["iss"] = .string("https://elsewhere.example") },
        Case("aud other", refused("jwt_aud")) { $0.logoutToken.claims["aud"] = .string("another-client") },
        Case("iat missing", refused("jwt_iat")) { $0.logoutToken.claims["iat"] = nil },
        Case("iat 331 s old (beyond 5 min and the leeway)", refused("jwt_iat")) { $0.advance = .seconds(331) },
        Case("iat 329 s old", .accepted) { $0.advance = .seconds(329) },
        Case("exp past", refused("jwt_exp")) { $0.logoutToken.claims["exp"] = .number($0.now - 60) },
        Case("exp ahead", .accepted) { $0.logoutToken.claims["exp"] = .number($0.now + 60) },
        Case("signed by an unpublished key", refused("jose_no_matching_key")) { $0.logoutToken.signer = TestKeys.stranger },
        Case("payload changed after signing", refused("jose_invalid_signature")) { $0.logoutToken.shape = .tampered },
        Case("alg none", refused("jose_unsupported_alg")) { $0.logoutToken.shape = .unsigned },
        Case("alg not configured", refused("jose_unsupported_alg")) { $0.logoutToken.algorithm = .edDSA },
        Case("encrypted to our key", .accepted) { $0.logoutToken.shape = .encrypted(.init()) },
    ]
}

@Suite struct LogoutTokenTests {
    @Test("back-channel logout tokens", arguments: Case.logoutTokens)
    func logoutToken(_ row: Case) async throws {
        try await Harness.run(row.setup) { harness in
            let claims = harness.scenario.logoutToken.claims
            let raw = try harness.scenario.logoutToken.compact()
            let token = await row.expected.verify { () async throws(UpstreamError) in try await harness.provider.verifyLogoutToken(raw) }
            guard let token else { return }
            #expect(token == LogoutToken(subject: claims["sub"]?.stringValue, sessionID: claims["sid"]?.stringValue, tokenID: "jti-1"))
        }
    }
}
