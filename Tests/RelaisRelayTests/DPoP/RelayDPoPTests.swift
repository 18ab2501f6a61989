import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// DPoP (RFC 9449) end to end through the relay's routes: bound tokens at `/token`, proofs with
/// them at `/userinfo` and `/auth`, one use per proof.
@Suite struct RelayDPoPTests {
    typealias Route = RelayRouteTests

    /// An app instance's DPoP key, making proofs for the fixture's manual clock.
    struct AppKey {
        let key: JWK
        let clock: ManualClock

        init(_ clock: ManualClock) throws {
            key = try JWK.generate(for: .es256)
            self.clock = clock
        }

        func proof(_ method: String, _ url: String, accessToken: String? = nil, nonce: String? = nil, jti: String = SecureRandom.token(bits: 96)) throws -> String {
            var claims: [String: JSONValue] = ["jti": .string(jti), "htm": .string(method), "htu": .string(url), "iat": .number(clock.now.rounded(.down))]
            if let nonce { claims["nonce"] = .string(nonce) }
            if let accessToken { claims["ath"] = .string(Base64URL.encode(SHA256.hash(Array(accessToken.utf8)))) }
            return try JWS.sign(
                payload: JSONValue.object(claims).serialized(), with: key, algorithm: .es256,
                extraHeader: ["typ": .string("dpop+jwt"), "jwk": .object(key.publicJSON() ?? [:])]
            )
        }
    }

    static let tokenURL = Route.issuer + "/token"

    /// A sign-in's code, redeemed at `/token` with `headers` (a DPoP proof or none).
    static func redeem(
        _ fixture: Route.Fixture, _ client: any TestClientProtocol, dpopJKT: String? = nil, subject: String = "sub-1", deviceName: String? = nil, headers: HTTPFields
    ) async throws -> TestResponse {
        let verifier = SecureRandom.token(bits: 256)
        var app = AppRequest(
            clientID: "app", redirectURI: Route.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: nil,
            providerID: "fc", acr: "eidas1", forceLogin: false
        )
        app.redemption.dpopJKT = dpopJKT
        app.deviceName = deviceName
        let code = try await RelayRouteTests.mintCode(fixture, app: app, subject: subject, acr: "eidas1")
        var all = Route.formHeaders
        all.append(contentsOf: headers)
        let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", Route.redirect), ("code_verifier", verifier)]
        return try await client.execute(uri: "/token", method: .post, headers: all, body: Route.form(fields))
    }

    static func refresh(_ client: any TestClientProtocol, _ token: String, proof: String?) async throws -> TestResponse {
        var headers = Route.formHeaders
        if let proof { headers[DPoPGuard.header] = proof }
        return try await client.execute(
            uri: "/token", method: .post, headers: headers, body: Route.form([("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", token)])
        )
    }

    static func claims(_ token: String) throws -> [String: JSONValue] { try #require(JSONValue.object(from: try JWS.parse(token).payload)) }

    @Test(.tags(.fast)) func aProofAtTheTokenEndpointBindsTheTokensToItsKey() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let key = try AppKey(fixture.clock)
            let response = try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)])
            #expect(response.status == .ok)
            let tokens = Route.json(response)
            #expect(tokens["token_type"] == .string("DPoP"))
            let access = try #require(tokens["access_token"]?.stringValue)
            #expect(try Self.claims(access)["cnf"] == .object(["jkt": .string(key.key.thumbprint())]))
            // Introspection hands APIs the key, so they can check proofs themselves.
            var basic = Route.formHeaders
            basic[.authorization] = "Basic " + Base64.encode(Array("api:api-secret-0123456789-0123456789".utf8))
            let introspected = Route.json(try await client.execute(uri: "/introspect", method: .post, headers: basic, body: Route.form([("token", access)])))
            #expect(introspected["active"] == .bool(true))
            #expect(introspected["cnf"] == .object(["jkt": .string(key.key.thumbprint())]))
            #expect(introspected["token_type"] == .string("DPoP"))
            let refreshToken = try #require(tokens["refresh_token"]?.stringValue)

            // The refresh token is bound too: no proof, or another key's, is refused.
            #expect(Route.json(try await Self.refresh(client, refreshToken, proof: nil))["error"] == .string("invalid_grant"))
            let other = try AppKey(fixture.clock)
            let stolen = try await Self.refresh(client, refreshToken, proof: try other.proof("POST", Self.tokenURL))
            #expect(Route.json(stolen)["error_description"] == .string("the refresh token is bound to a DPoP key: send a proof by that key"))
            #expect(Route.json(stolen)["error_reason"] == .string("dpop_key_mismatch"))
            let refreshed = try await Self.refresh(client, refreshToken, proof: try key.proof("POST", Self.tokenURL))
            #expect(refreshed.status == .ok && Route.json(refreshed)["token_type"] == .string("DPoP"))

            // A proof is good once, for its method and URL only.
            let proof = try key.proof("POST", Self.tokenURL)
            let next = try #require(Route.json(refreshed)["refresh_token"]?.stringValue)
            #expect(try await Self.refresh(client, next, proof: proof).status == .ok)
            let replay = try await Self.refresh(
                client, try #require(Route.json(try await Self.refresh(client, next, proof: try key.proof("POST", Self.tokenURL)))["refresh_token"]?.stringValue), proof: proof)
            #expect(replay.status == .badRequest && Route.json(replay)["error"] == .string("invalid_dpop_proof"))
            #expect(Route.json(replay)["error_description"] == .string("this proof was already used (jti)"))
            let elsewhere = try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Route.issuer + "/userinfo")])
            #expect(Route.json(elsewhere)["error"] == .string("invalid_dpop_proof"))
            #expect(Route.json(elsewhere)["error_description"]?.stringValue?.hasPrefix("dpop_htu") == true)
            let twice: HTTPFields = [DPoPGuard.header: try key.proof("POST", Self.tokenURL), DPoPGuard.header: try key.proof("POST", Self.tokenURL)]
            #expect(Route.json(try await Self.redeem(fixture, client, headers: twice))["error_description"] == .string("send exactly one DPoP header"))
            // An old proof, once the clock has moved past the window.
            let old = try key.proof("POST", Self.tokenURL)
            fixture.clock.advance(by: .seconds(61))
            #expect(Route.json(try await Self.redeem(fixture, client, headers: [DPoPGuard.header: old]))["error_description"]?.stringValue?.hasPrefix("dpop_iat") == true)
        }
    }

    @Test(.tags(.fast)) func aBoundTokenNeedsTheDPoPSchemeAndAProofAtUserinfo() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let key = try AppKey(fixture.clock)
            let access = try #require(
                Route.json(try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)]))["access_token"]?.stringValue)
            let userinfo = Route.issuer + "/userinfo"
            let ok = try await client.execute(
                uri: "/userinfo", method: .get, headers: [.authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", userinfo, accessToken: access)]
            )
            #expect(ok.status == .ok)

            let asBearer = try await client.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer \(access)"])
            #expect(asBearer.status == .unauthorized && Route.json(asBearer)["error"] == .string("invalid_token"))
            #expect(asBearer.headers[.wwwAuthenticate]?.hasPrefix(#"DPoP algs="ES256 ES384 EdDSA RS256 PS256", error="invalid_token""#) == true)
            for (proof, reason) in [
                (nil, "a DPoP-bound token needs a DPoP proof"),
                (try key.proof("GET", userinfo), "dpop_ath: ath is missing or not the hash of the access token"),
                (try key.proof("POST", userinfo, accessToken: access), "dpop_htm: htm is not the request's method"),
                (try AppKey(fixture.clock).proof("GET", userinfo, accessToken: access), "the proof is not signed by the key the token is bound to"),
            ] as [(String?, String)] {
                var headers: HTTPFields = [.authorization: "DPoP \(access)"]
                if let proof { headers[DPoPGuard.header] = proof }
                let refused = try await client.execute(uri: "/userinfo", method: .get, headers: headers)
                #expect(refused.status == .unauthorized, "\(reason)")
                #expect(Route.json(refused)["error_description"] == .string(reason))
                #expect(refused.headers[.wwwAuthenticate]?.contains(#"error="invalid_dpop_proof""#) == true, "\(reason)")
            }
            // A bearer token presented with the DPoP scheme is refused too.
            let bearerToken = try await Route.accessToken(fixture, client)
            let mixed = try await client.execute(
                uri: "/userinfo", method: .get, headers: [.authorization: "DPoP \(bearerToken)", DPoPGuard.header: try key.proof("GET", userinfo, accessToken: bearerToken)]
            )
            #expect(Route.json(mixed)["error_description"] == .string("this token is not DPoP-bound: present it with the Bearer scheme"))
        }
    }

    @Test(.tags(.fast)) func thePolicyPerAppAndTheCodesKey() async throws {
        let required = Route.Fixture { $0.apps[0].dpop = .required }
        try await required.test { client in
            let refused = try await Self.redeem(required, client, headers: [:])
            #expect(refused.status == .badRequest && Route.json(refused)["error"] == .string("invalid_dpop_proof"))
            #expect(Route.json(refused)["error_description"] == .string("this app must send a DPoP proof (dpop: required)"))
        }
        let off = Route.Fixture { $0.apps[0].dpop = .off }
        try await off.test { client in
            let key = try AppKey(off.clock)
            let ignored = try await Self.redeem(off, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)])
            #expect(Route.json(ignored)["token_type"] == .string("Bearer"))
        }
        // dpop_jkt at /authorize (RFC 9449 §10): the code is redeemed only with a proof by that key.
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let key = try AppKey(fixture.clock)
            let other = try AppKey(fixture.clock)
            let wrongKey = try await Self.redeem(fixture, client, dpopJKT: key.key.thumbprint(), headers: [DPoPGuard.header: try other.proof("POST", Self.tokenURL)])
            #expect(Route.json(wrongKey)["error_description"] == .string("the code is bound to a DPoP key (dpop_jkt): send a proof by that key"))
            let none = try await Self.redeem(fixture, client, dpopJKT: key.key.thumbprint(), headers: [:])
            #expect(Route.json(none)["error"] == .string("invalid_grant"))
            let right = try await Self.redeem(fixture, client, dpopJKT: key.key.thumbprint(), headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)])
            #expect(right.status == .ok)
            // /authorize refuses a dpop_jkt that is not a thumbprint, and metadata names the algorithms.
            let query = "response_type=code&client_id=app&redirect_uri=\(Route.redirect)&code_challenge=\(PKCE.challenge(for: "v"))&code_challenge_method=S256&dpop_jkt=short"
            let authorize = try await client.execute(uri: "/authorize?" + query, method: .get)
            #expect(authorize.headers[.location]?.contains("dpop_jkt+must+be") == true)
            let metadata = Route.json(try await client.execute(uri: "/.well-known/oauth-authorization-server", method: .get))
            #expect(metadata["dpop_signing_alg_values_supported"] == .array(["ES256", "ES384", "EdDSA", "RS256", "PS256"].map { .string($0) }))
        }
    }

    /// RFC 9449 §8: with `dpop_nonce`, a proof carries a nonce Relais issued in the last two windows.
    @Test(.tags(.fast)) func serverNoncesAtTheTokenEndpoint() async throws {
        let fixture = Route.Fixture { $0.apps[0].dpopNonce = true }
        try await fixture.test { client in
            let key = try AppKey(fixture.clock)
            let first = try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)])
            #expect(first.status == .badRequest && Route.json(first)["error"] == .string("use_dpop_nonce"))
            let nonce = try #require(first.headers[DPoPGuard.nonceHeader])
            let second = try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL, nonce: nonce)])
            #expect(second.status == .ok && second.headers[DPoPGuard.nonceHeader] == nonce)
            // The previous window's nonce still passes; an older one or a made-up one does not.
            fixture.clock.advance(by: .seconds(60))
            #expect(try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL, nonce: nonce)]).status == .ok)
            fixture.clock.advance(by: .seconds(60))
            let stale = try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL, nonce: nonce)])
            #expect(Route.json(stale)["error"] == .string("use_dpop_nonce") && stale.headers[DPoPGuard.nonceHeader] != nonce)
            let invented = try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL, nonce: "AAAA")])
            #expect(Route.json(invented)["error"] == .string("use_dpop_nonce"))
        }
    }

    /// At `/auth` the proof is for the request the gateway guards, as a trusted gateway describes it.
    @Test func forwardAuthChecksTheProofAgainstTheGuardedRequest() async throws {
        let fixture = Route.Fixture { $0.server.trustedProxies = ["127.0.0.1/32", "::1/128"] }
        try await fixture.test(.live) { client in
            let key = try AppKey(fixture.clock)
            let access = try #require(
                Route.json(try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)]))["access_token"]?.stringValue)
            let guarded: HTTPFields = [
                HTTPField.Name("X-Forwarded-Method")!: "DELETE", HTTPField.Name("X-Forwarded-Proto")!: "https",
                HTTPField.Name("X-Forwarded-Host")!: "api.example.fr", HTTPField.Name("X-Forwarded-Uri")!: "/orders/42?x=1",
            ]
            var headers = guarded
            headers[.authorization] = "DPoP \(access)"
            headers[DPoPGuard.header] = try key.proof("DELETE", "https://api.example.fr/orders/42", accessToken: access)
            #expect(try await client.execute(uri: "/auth", method: .get, headers: headers).status == .ok)
            // RFC 9449 §7.1: the gateway's own requirements refuse a bound token in the DPoP scheme.
            for (query, status) in [("?aud=another-api", HTTPResponse.Status.unauthorized), ("?scope=orders:write", .forbidden), ("?attested=1", .forbidden)] {
                headers[DPoPGuard.header] = try key.proof("DELETE", "https://api.example.fr/orders/42", accessToken: access)
                let refused = try await client.execute(uri: "/auth" + query, method: .get, headers: headers)
                #expect(refused.status == status && refused.headers[.wwwAuthenticate]?.hasPrefix("DPoP ") == true, "\(query): \(refused.headers)")
            }
            headers[DPoPGuard.header] = try key.proof("GET", "https://api.example.fr/orders/42", accessToken: access)
            #expect(try await client.execute(uri: "/auth", method: .get, headers: headers).status == .unauthorized)
            // Without the description of the guarded request, a bound token cannot be checked.
            let undescribed = try await client.execute(
                uri: "/auth", method: .get, headers: [.authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", Route.issuer + "/auth", accessToken: access)]
            )
            #expect(undescribed.status == .badRequest && undescribed.headers[.wwwAuthenticate]?.hasPrefix("DPoP ") == true)
        }
        // From a peer that is not a trusted proxy, the description is not believed.
        let untrusting = Route.Fixture()
        try await untrusting.test(.live) { client in
            let key = try AppKey(untrusting.clock)
            let access = try #require(
                Route.json(try await Self.redeem(untrusting, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)]))["access_token"]?.stringValue)
            let response = try await client.execute(
                uri: "/auth", method: .get,
                headers: [
                    .authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", "https://api.example.fr/x", accessToken: access),
                    HTTPField.Name("X-Forwarded-Method")!: "GET", HTTPField.Name("X-Forwarded-Proto")!: "https",
                    HTTPField.Name("X-Forwarded-Host")!: "api.example.fr", HTTPField.Name("X-Forwarded-Uri")!: "/x",
                ])
            #expect(response.status == .badRequest)
        }
    }

    /// RFC 9449 §7.1: a bound token presented with the DPoP scheme is challenged with `DPoP`, also
    /// once its session has ended (issue 33, finding 11).
    @Test(.tags(.fast)) func aBoundTokenOfAnEndedSessionGetsTheDPoPChallenge() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let key = try AppKey(fixture.clock)
            let tokens = Route.json(try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)]))
            let access = try #require(tokens["access_token"]?.stringValue)
            let sid = try #require(try Self.claims(access)["sid"]?.stringValue)
            let ended = try await client.execute(
                uri: "/sessions/\(sid)", method: .delete,
                headers: [.authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("DELETE", Route.issuer + "/sessions/\(sid)", accessToken: access)]
            )
            #expect(ended.status.code < 300, "\(Route.json(ended))")
            let userinfo = try await client.execute(
                uri: "/userinfo", method: .get,
                headers: [.authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", Route.issuer + "/userinfo", accessToken: access)]
            )
            #expect(userinfo.status == .unauthorized && Route.json(userinfo)["error_description"] == .string("the session has ended"))
            let challenge = try #require(userinfo.headers[.wwwAuthenticate])
            #expect(challenge.hasPrefix(#"DPoP algs=""#) && challenge.contains(#"error="invalid_token""#), "\(challenge)")
            // An unreadable token presented with the DPoP scheme is challenged in that scheme too.
            let garbled = try await client.execute(
                uri: "/userinfo", method: .get,
                headers: [.authorization: "DPoP \(access)x", DPoPGuard.header: try key.proof("GET", Route.issuer + "/userinfo", accessToken: access + "x")]
            )
            #expect(garbled.headers[.wwwAuthenticate]?.hasPrefix("DPoP ") == true)
        }
    }

    /// A live bound token refused by `/userinfo`'s own checks (a parameter it does not know) is
    /// challenged in the DPoP scheme too.
    @Test(.tags(.fast)) func userinfoRefusesABoundTokenInTheDPoPScheme() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let key = try AppKey(fixture.clock)
            let access = try #require(
                Route.json(try await Self.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", Self.tokenURL)]))["access_token"]?.stringValue)
            let refused = try await client.execute(
                uri: "/userinfo?acr_values=eidas3", method: .get,
                headers: [.authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", Route.issuer + "/userinfo", accessToken: access)]
            )
            #expect(refused.status == .badRequest && refused.headers[.wwwAuthenticate]?.hasPrefix("DPoP ") == true, "\(refused.headers)")
        }
    }
}
