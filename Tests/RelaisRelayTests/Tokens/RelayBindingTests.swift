import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Checks no other test guarded (issue 33, finding 16): a code and a refresh token serve only the
/// app they were issued to, an access token must say `typ: at+jwt`, and a DPoP proof is good once
/// at `/userinfo` and `/auth` too.
@Suite struct RelayBindingTests {
    typealias Route = RelayRouteTests
    typealias DPoP = RelayDPoPTests

    /// Two apps, `app` and `other`, with the same redirect URI and provider.
    static func twoApps() -> Route.Fixture {
        Route.Fixture { configuration in
            configuration.apps.append(AppSettings(clientID: "other", redirectURIs: [Route.redirect], providers: ["fc"], scopes: ["openid", "profile"]))
        }
    }

    static func refresh(_ client: any TestClientProtocol, _ token: String, as clientID: String) async throws -> [String: JSONValue] {
        let fields = [("grant_type", "refresh_token"), ("client_id", clientID), ("refresh_token", token)]
        return Route.json(try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(fields)))
    }

    @Test(.tags(.fast)) func aCodeIsRedeemedOnlyByTheAppItWasIssuedTo() async throws {
        let fixture = Self.twoApps()
        try await fixture.test { client in
            let verifier = SecureRandom.token(bits: 256)
            let request = AppRequest(
                clientID: "app", redirectURI: Route.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: nil,
                providerID: "fc", acr: "eidas1", forceLogin: false
            )
            let code = try await Route.mintCode(fixture, app: request, acr: "eidas1")
            let asOther = [("grant_type", "authorization_code"), ("client_id", "other"), ("code", code), ("redirect_uri", Route.redirect), ("code_verifier", verifier)]
            let refused = try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(asOther))
            #expect(refused.status == .badRequest && Route.json(refused)["error"] == .string("invalid_grant"))
            #expect(Route.json(refused)["error_description"] == .string("the code was issued to another client"))
            // The failed try burnt the code: its own app cannot redeem it either.
            let asApp = asOther.map { $0.0 == "client_id" ? ("client_id", "app") : $0 }
            let burnt = try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(asApp))
            #expect(Route.json(burnt)["error"] == .string("invalid_grant"))
        }
    }

    @Test(.tags(.fast)) func aRefreshTokenRotatesOnlyForTheAppItWasIssuedTo() async throws {
        let fixture = Self.twoApps()
        try await fixture.test { client in
            let signed = try await RelayUserSessionTests.signIn(fixture, client)
            let refused = try await Self.refresh(client, signed.refresh, as: "other")
            #expect(refused["error"] == .string("invalid_grant") && refused["error_description"] == .string("the refresh token was issued to another client"))
            // Refused without effect: the app itself still rotates it.
            #expect(try await Self.refresh(client, signed.refresh, as: "app")["refresh_token"] != nil)

            // An earlier version's random refresh token (its own record) is bound the same way.
            let (_, legacy) = try await RefreshGenerationTests.legacySession(fixture)
            let legacyRefused = try await Self.refresh(client, legacy, as: "other")
            #expect(legacyRefused["error_description"] == .string("the refresh token was issued to another client"))
            #expect(try await Self.refresh(client, legacy, as: "app")["refresh_token"] != nil)
        }
    }

    /// A token Relais signed with every access-token claim but `typ: at+jwt` (an id_token's `JWT`,
    /// or none) is not an access token.
    @Test(.tags(.fast)) func anAccessTokenMustSayAtJWT() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let access = try await Route.accessToken(fixture, client)
            let payload = try JWS.parse(access).payload
            let ring = try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions).ring
            func resigned(_ header: [String: JSONValue]) throws -> String {
                try JWS.sign(payload: payload, with: ring.activeSigningKey, algorithm: ring.activeAlgorithm, extraHeader: header)
            }
            // The same claims signed again with the right typ pass: only the typ differs below.
            #expect(try await client.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer " + (try resigned(["typ": .string("at+jwt")]))]).status == .ok)
            for header in [["typ": JSONValue.string("JWT")], [:], ["typ": .string("dpop+jwt")]] {
                let token = try resigned(header)
                let userinfo = try await client.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer " + token])
                #expect(userinfo.status == .unauthorized && Route.json(userinfo)["error"] == .string("invalid_token"), "\(header)")
                #expect(Route.json(userinfo)["error_description"] == .string("the access token is not valid (jwt_typ)"), "\(header)")
                let auth = try await client.execute(uri: "/auth", method: .get, headers: [.authorization: "Bearer " + token])
                #expect(auth.status == .unauthorized, "\(header)")
            }
        }
    }

    @Test(.tags(.fast)) func aDPoPProofIsGoodOnceAtUserinfo() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let key = try DPoP.AppKey(fixture.clock)
            let tokens = Route.json(try await DPoP.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", DPoP.tokenURL)]))
            let access = try #require(tokens["access_token"]?.stringValue)
            let headers: HTTPFields = [.authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", Route.issuer + "/userinfo", accessToken: access)]
            #expect(try await client.execute(uri: "/userinfo", method: .get, headers: headers).status == .ok)
            let replayed = try await client.execute(uri: "/userinfo", method: .get, headers: headers)
            #expect(replayed.status == .unauthorized && Route.json(replayed)["error"] == .string("invalid_dpop_proof"))
            #expect(Route.json(replayed)["error_description"] == .string("this proof was already used (jti)"))
        }
    }

    @Test func aDPoPProofIsGoodOnceAtForwardAuth() async throws {
        let fixture = Route.Fixture { $0.server.trustedProxies = ["127.0.0.1/32", "::1/128"] }
        try await fixture.test(.live) { client in
            let key = try DPoP.AppKey(fixture.clock)
            let tokens = Route.json(try await DPoP.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", DPoP.tokenURL)]))
            let access = try #require(tokens["access_token"]?.stringValue)
            let headers: HTTPFields = [
                HTTPField.Name("X-Forwarded-Method")!: "GET", HTTPField.Name("X-Forwarded-Proto")!: "https",
                HTTPField.Name("X-Forwarded-Host")!: "api.example.fr", HTTPField.Name("X-Forwarded-Uri")!: "/orders",
                .authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", "https://api.example.fr/orders", accessToken: access),
            ]
            #expect(try await client.execute(uri: "/auth", method: .get, headers: headers).status == .ok)
            let replayed = try await client.execute(uri: "/auth", method: .get, headers: headers)
            #expect(replayed.status == .unauthorized && Route.json(replayed)["error_description"] == .string("this proof was already used (jti)"))
        }
    }
}
