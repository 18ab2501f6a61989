import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// The relay's routes driven through Hummingbird's router test framework: no socket, no process,
/// an embedded store and a manual clock. What needs the provider is tested with the harness.
@Suite struct RelayRouteTests {
    static let issuer = "https://relais.example.fr"
    /// The web session cookie's name at that https issuer.
    static let sessionCookie = "__Host-relais-session"
    static let redirect = "com.example.app:/oauth2redirect"

    struct Fixture {
        let clock = ManualClock()
        let store: EmbeddedStore
        /// What the relay talks to: the embedded store, or a test's wrapper around it.
        let served: any KeyValueStore
        let configuration: RelaisConfiguration
        /// The security events the relay wrote.
        let events = CollectedEvents()
        /// Grants and attestation formats a test adds (docs/extending.md).
        var extensions = RelayExtensions()

        init(_ change: (inout RelaisConfiguration) -> Void = { _ in }, serving wrap: (EmbeddedStore) -> any KeyValueStore = { $0 }) {
            store = EmbeddedStore(clock: clock)
            served = wrap(store)
            var configuration = RelaisConfiguration()
            configuration.server.environment = .development
            configuration.server.publicBaseURL = RelayRouteTests.issuer
            configuration.metrics.enabled = false
            // Never reached by these tests: only the sign-in itself talks to the provider.
            configuration.providers = [ProviderSettings(id: "fc", preset: .franceconnectV2, issuer: "http://127.0.0.1:9/api/v2", clientID: "relais")]
            configuration.apps = [AppSettings(clientID: "app", redirectURIs: [RelayRouteTests.redirect], providers: ["fc"], scopes: ["openid", "profile"])]
            configuration.resourceServers = [ResourceServerSettings(id: "api", secret: "api-secret-0123456789-0123456789", audiences: [])]
            change(&configuration)
            self.configuration = configuration
        }

        /// How a test reaches the router: `.router` needs no socket; `.live` serves over loopback
        /// (the peer address is then 127.0.0.1), which `make test-fast` refuses (`FastTests`).
        enum Transport { case router, live }

        /// Runs `body` against the relay's router.
        func test(_ transport: Transport = .router, _ body: @Sendable @escaping (any TestClientProtocol) async throws -> Void) async throws {
            if transport == .live { try FastTests.refuse("serves the relay over loopback (.live)") }
            // The RSA key a relay in development makes when its store has none, made once per
            // process instead of once per fixture (0.1 to 1 s of CPU each, which starved the
            // concurrency pool other tests' timings need).
            _ = try await store.setIfAbsent(RelayStore.Key.rsaSigningKey, TestKeys.developmentRSAPEM, ttl: .seconds(86_400))
            let http = HTTPClient(configuration: .init())
            let relay = try await Relay(configuration: configuration, store: served, httpClient: http, clock: clock, eventSink: events, extensions: extensions)
            let router = RelaisApplication.makeRouter(
                configuration: configuration, dependencies: RelaisDependencies(store: served, httpClient: http), additionalRoutes: relay.register(on:)
            )
            let app = Application(router: router, logger: Logger(label: "relay-route-tests") { _ in SwiftLogNoOpLogHandler() })
            try await app.test(transport == .live ? .live : .router) { client in try await body(client) }
            try await http.shutdown()
        }

        var sessions: RelayStore { RelayStore(store: store, settings: configuration.relay, clock: clock) }
    }

    static func form(_ fields: [(String, String)]) -> ByteBuffer { ByteBuffer(string: FormParameters.encode(fields)) }
    static let formHeaders: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    static func json(_ response: TestResponse) -> [String: JSONValue] { JSONValue.object(from: Array(buffer: response.body)) ?? [:] }

    // MARK: - /token

    struct TokenRefusal: Sendable, CustomTestStringConvertible {
        var fields: [(String, String)]
        var error: String
        var description: String
        var testDescription: String { description }

        init(_ fields: [(String, String)], _ error: String, _ description: String) {
            self.fields = fields
            self.error = error
            self.description = description
        }
    }

    static let code: [(String, String)] = [("grant_type", "authorization_code"), ("client_id", "app")]
    static let tokenRefusals: [TokenRefusal] = [
        TokenRefusal([("grant_type", "authorization_code")], "invalid_request", "client_id is missing (apps are public clients)"),
        TokenRefusal([("client_id", "app")], "invalid_request", "grant_type is missing"),
        TokenRefusal(
            [("grant_type", "password"), ("client_id", "app")], "unsupported_grant_type",
            "grant_type must be authorization_code, refresh_token or urn:ietf:params:oauth:grant-type:device_code"),
        TokenRefusal(code + [("client_id", "app")], "invalid_request", "the parameter 'client_id' is given more than once"),
        TokenRefusal(code + [("redirect_uri", redirect), ("code_verifier", "v")], "invalid_request", "code is missing"),
        TokenRefusal(code + [("code", "c"), ("code_verifier", "v")], "invalid_request", "redirect_uri is missing"),
        TokenRefusal(code + [("code", "c"), ("redirect_uri", redirect)], "invalid_request", "code_verifier is missing (PKCE)"),
        TokenRefusal(code + [("code", "c"), ("redirect_uri", redirect), ("code_verifier", "v")], "invalid_grant", "the code is unknown or expired"),
        TokenRefusal([("grant_type", "refresh_token"), ("client_id", "app")], "invalid_request", "refresh_token is missing"),
        TokenRefusal(
            [("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", "nope")], "invalid_grant", "the refresh token is unknown, or its session has ended"),
    ]

    @Test(.tags(.fast), arguments: tokenRefusals)
    func tokenRefusalsAreOAuthJSON(_ refusal: TokenRefusal) async throws {
        try await Fixture().test { client in
            let response = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form(refusal.fields))
            #expect(response.status == .badRequest)
            #expect(response.headers[.cacheControl] == "no-store" && response.headers[.contentType] == "application/json")
            let body = Self.json(response)
            #expect(body["error"] == .string(refusal.error) && body["error_description"] == .string(refusal.description))
            #expect(body["request_id"]?.stringValue == response.headers[HTTPField.Name("X-Request-Id")!])
        }
    }

    @Test(.tags(.fast)) func anUnknownClientAtTheTokenEndpointIsUnauthorized() async throws {
        try await Fixture().test { client in
            let response = try await client.execute(
                uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form([("grant_type", "refresh_token"), ("client_id", "other")]))
            #expect(response.status == .unauthorized && Self.json(response)["error"] == .string("invalid_client"))
            let notAForm = try await client.execute(uri: "/token", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}"))
            #expect(
                notAForm.status == .badRequest
                    && Self.json(notAForm)["error_description"] == .string("the body must be an application/x-www-form-urlencoded form of at most 1000 fields"))
            // A form of thousands of tiny fields (under the body limit) is refused at field 1,001.
            let flood = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: ByteBuffer(string: String(repeating: "a=&", count: 20_000)))
            #expect(flood.status == .badRequest && Self.json(flood)["error"] == .string("invalid_request"))
            #expect(Self.json(flood)["error_description"] == .string("the body must be an application/x-www-form-urlencoded form of at most 1000 fields"))
        }
    }

    /// A code lives `relay.code_lifetime` (60 s) on the store's clock.
    @Test(.tags(.fast)) func aCodeExpiresWithTheClock() async throws {
        let fixture = Fixture()
        let verifier = SecureRandom.token(bits: 256)
        let app = AppRequest(
            clientID: "app", redirectURI: Self.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: nil,
            providerID: "fc", acr: "eidas1", forceLogin: false
        )
        let code = try await Self.mintCode(
            fixture, app: app, acr: "eidas1", identity: SessionIdentity(claims: ["given_name": .string("Angela")], amr: nil, authTime: nil, providerIDToken: "x")
        )
        fixture.clock.advance(by: .seconds(61))
        try await fixture.test { client in
            let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", Self.redirect), ("code_verifier", verifier)]
            let response = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form(fields))
            #expect(Self.json(response)["error_description"] == .string("the code is unknown or expired"))
        }
    }

    /// The same code redeemed in time opens a session; a second redemption ends it.
    @Test(.tags(.fast)) func aCodeOpensOneSessionAndItsReplayEndsIt() async throws {
        let fixture = Fixture()
        let verifier = SecureRandom.token(bits: 256)
        let app = AppRequest(
            clientID: "app", redirectURI: Self.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid", "profile"],
            nonce: "n-1", providerID: "fc", acr: "eidas1", forceLogin: false
        )
        let code = try await Self.mintCode(
            fixture, app: app, acr: "eidas1", identity: SessionIdentity(claims: ["given_name": .string("Angela")], amr: ["fc"], authTime: 1, providerIDToken: "x")
        )
        fixture.clock.advance(by: .seconds(59))
        try await fixture.test { client in
            let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", Self.redirect), ("code_verifier", verifier)]
            let response = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form(fields))
            #expect(response.status == .ok)
            let tokens = Self.json(response)
            let access = try #require(tokens["access_token"]?.stringValue)
            let bearer: HTTPFields = [.authorization: "Bearer \(access)"]
            let userinfo = try await client.execute(uri: "/userinfo", method: .get, headers: bearer)
            #expect(Self.json(userinfo) == ["sub": .string("sub-1"), "given_name": .string("Angela")])
            let replay = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form(fields))
            #expect(Self.json(replay)["error_description"] == .string("the code was already used; the session it opened is revoked"))
            let after = try await client.execute(uri: "/userinfo", method: .get, headers: bearer)
            #expect(after.status == .unauthorized && after.headers[.wwwAuthenticate]?.contains(#"error="invalid_token""#) == true)
        }
    }

    // MARK: - /authorize

    @Test(.tags(.fast)) func untrustedClientsAndRedirectsGetAPageNeverARedirect() async throws {
        try await Fixture().test { client in
            for (query, code) in [
                ("redirect_uri=\(Self.redirect)", "invalid_request"), ("client_id=nope&redirect_uri=x", "unknown_client"),
                ("client_id=app&redirect_uri=https%3A%2F%2Fevil.example%2Fcb", "invalid_redirect_uri"), ("client_id=%ZZ", "invalid_request"),
            ] {
                let response = try await client.execute(uri: "/authorize?" + query, method: .get)
                #expect(response.status == .badRequest && response.headers[.location] == nil, "\(query)")
                #expect(String(buffer: response.body).contains(#"id="error-code">\#(code)<"#), "\(query)")
            }
        }
    }

    /// RFC 8252 §7.3: a registered loopback URI accepts any port, in ASCII digits only: another
    /// script's digits are not a port, and such a URI is not registered.
    @Test func aLoopbackRedirectPortIsASCIIDigitsOnly() async throws {
        let fixture = Fixture { $0.apps[0].redirectURIs.append("http://127.0.0.1/cb") }
        try await fixture.test { client in
            let challenge = PKCE.challenge(for: SecureRandom.token(bits: 256))
            func authorize(_ redirect: String) async throws -> TestResponse {
                let query = FormParameters.encode([
                    ("client_id", "app"), ("redirect_uri", redirect), ("response_type", "code"), ("code_challenge", challenge), ("code_challenge_method", "S256"),
                ])
                return try await client.execute(uri: "/authorize?" + query, method: .get)
            }
            // Accepted: the app's own URI gets the answer (the unreachable provider's error, here).
            let accepted = try await authorize("http://127.0.0.1:51234/cb")
            #expect(accepted.status == .found && accepted.headers[.location]?.hasPrefix("http://127.0.0.1:51234/cb?") == true)
            for port in ["٥١٢٣٤", "５１２３４", "123456"] {
                let refused = try await authorize("http://127.0.0.1:\(port)/cb")
                #expect(refused.status == .badRequest && String(buffer: refused.body).contains(#"id="error-code">invalid_redirect_uri<"#), "\(port)")
            }
        }
    }

    @Test(.tags(.fast)) func aBadRequestFromAKnownAppGoesBackToItWithStateAndIssuer() async throws {
        try await Fixture().test { client in
            let response = try await client.execute(uri: "/authorize?client_id=app&redirect_uri=\(Self.redirect)&response_type=code&state=s1", method: .get)
            #expect(response.status == .found)
            let location = try #require(response.headers[.location])
            let query = try #require(FormParameters(encoded: location.split(separator: "?", maxSplits: 1)[1]))
            #expect(query["error"] == "invalid_request" && query["error_description"] == "code_challenge is required (PKCE, RFC 7636)")
            #expect(query["state"] == "s1" && query["iss"] == Self.issuer)
        }
    }

    @Test(.tags(.fast)) func anIdpHintForAProviderThatTakesNoneIsRefusedNotDropped() async throws {
        let fixture = Fixture { $0.providers[0].forwardsIDPHint = false }
        try await fixture.test { client in
            let challenge = PKCE.challenge(for: SecureRandom.token(bits: 256))
            let query = "client_id=app&redirect_uri=\(Self.redirect)&response_type=code&state=s1&code_challenge=\(challenge)&code_challenge_method=S256&idp_hint=idp-1"
            let response = try await client.execute(uri: "/authorize?" + query, method: .get)
            let location = try #require(response.headers[.location])
            let answer = try #require(FormParameters(encoded: location.split(separator: "?", maxSplits: 1)[1]))
            #expect(answer["error"] == "invalid_request" && answer["error_description"] == "provider 'fc' takes no idp_hint")
        }
    }

    // MARK: - Forward-auth

    /// A code as /callback mints it: the sign-in sealed in it (``SealedCode``), nothing stored.
    static func mintCode(
        _ fixture: Fixture, app: AppRequest, subject: String = "sub-1", acr: String?,
        identity: SessionIdentity = SessionIdentity(claims: [:], amr: nil, authTime: nil, providerIDToken: "x"), replaces: String? = nil, sid: String = RelayStore.newSessionID(),
        lifetime: Double? = nil
    ) async throws -> String {
        let vault = SessionVault(keys: try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions))
        let record = RelayCode(app: app, subject: subject, acr: acr, sealedIdentity: try vault.seal(identity), providerSessionID: nil, replaces: replaces)
        let deadline = fixture.sessions.clock.now + (lifetime ?? Double(fixture.sessions.settings.codeLifetime.components.seconds))
        return try SealedCode(sid: sid, record: record, expiresAt: deadline).seal(with: vault)
    }

    /// A code as versions before sealed codes stored it (Migration/BeforeSealedCodes.swift).
    static func saveStoredCode(_ fixture: Fixture, _ record: RelayCode, code: String) async throws {
        try await fixture.sessions.store.set(RelayStore.Key.code(code), StoredJSON.encode(record), ttl: fixture.sessions.settings.codeLifetime)
    }

    /// A session opened through a code (as /callback mints it) and its access token.

    static func accessToken(_ fixture: Fixture, _ client: any TestClientProtocol, provider: String = "fc", acr: String = "eidas1") async throws -> String {
        let verifier = SecureRandom.token(bits: 256)
        let app = AppRequest(
            clientID: "app", redirectURI: redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: nil,
            providerID: provider, acr: acr, forceLogin: false
        )
        let code = try await mintCode(fixture, app: app, acr: acr)
        let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", redirect), ("code_verifier", verifier)]
        let response = try await client.execute(uri: "/token", method: .post, headers: formHeaders, body: form(fields))
        return try #require(json(response)["access_token"]?.stringValue, "\(json(response))")
    }

    /// A gateway query that cannot be read refuses the request: it never passes with the
    /// requirements it carried dropped.
    @Test(.tags(.fast)) func anUnreadableAuthQueryFailsClosed() async throws {
        let fixture = Fixture()
        try await fixture.test { client in
            let bearer: HTTPFields = [.authorization: "Bearer \(try await Self.accessToken(fixture, client))"]
            #expect(try await client.execute(uri: "/auth?acr=eidas3", method: .get, headers: bearer).status == .unauthorized)
            for query in ["acr=eidas3&x=%FF", "acr=eidas3&x=%ZZ", "acr=eidas1&acr=eidas3", "max_age=ten", "max_age=-1", "max_age=99999999999"] {
                let response = try await client.execute(uri: "/auth?" + query, method: .get, headers: bearer)
                #expect(response.status == .badRequest && Self.json(response)["error"] == .string("invalid_request"), "\(query)")
            }
            #expect(try await client.execute(uri: "/auth?acr=eidas1", method: .get, headers: bearer).status == .ok)
            // A value the parameter does not take, an empty one, or a parameter /auth does not
            // know is refused too, never read as "nothing required" (issue 33, finding 12).
            for query in [
                "attested=maybe", "attested=", "attested=true", "aud=", "aud=+", "aud=a++b", "session=", "session=yes", "scope=", "scope=openid+", "via=",
                "acr=", "acr=a+b", "max_age=", "atested=1", "audience=orders-api",
            ] {
                let response = try await client.execute(uri: "/auth?" + query, method: .get, headers: bearer)
                #expect(response.status == .badRequest && Self.json(response)["error"] == .string("invalid_request"), "\(query)")
            }
            for query in ["attested=0", "session=0", "session=1", "scope=openid", "via=token", "aud=" + Self.issuer] {
                #expect(try await client.execute(uri: "/auth?" + query, method: .get, headers: bearer).status == .ok, "\(query)")
            }
        }
    }

    /// `/auth/` is the `/auth/…` of an empty guarded path: the query belongs to the client and is
    /// ignored, so it can neither switch the session check off nor add anything.
    @Test(.tags(.fast)) func theTrailingSlashAuthIgnoresTheClientQuery() async throws {
        let fixture = Fixture()
        try await fixture.test { client in
            let token = try await Self.accessToken(fixture, client)
            let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
            #expect(try await client.execute(uri: "/auth/?acr=eidas3", method: .get, headers: bearer).status == .ok)
            let revoke = try await client.execute(uri: "/revoke", method: .post, headers: Self.formHeaders, body: Self.form([("client_id", "app"), ("token", token)]))
            #expect(revoke.status == .ok)
            #expect(try await client.execute(uri: "/auth?session=0", method: .get, headers: bearer).status == .ok)  // the gateway's own choice
            #expect(try await client.execute(uri: "/auth/?session=0", method: .get, headers: bearer).status == .unauthorized)
        }
    }

    /// A token's level is compared on the scale of the provider that signed the person in.
    @Test func acrLevelsFollowTheProvidersOwnOrder() async throws {
        let fixture = Fixture { configuration in
            var other = ProviderSettings(id: "op", preset: .oidc, issuer: "http://127.0.0.1:9/op", clientID: "relais")
            other.acrOrder = ["bronze", "silver", "gold"]
            configuration.providers.append(other)
            configuration.apps[0].providers.append("op")
        }
        try await fixture.test { client in
            let bearer: HTTPFields = [.authorization: "Bearer \(try await Self.accessToken(fixture, client, provider: "op", acr: "silver"))"]
            #expect(try await client.execute(uri: "/auth?acr=bronze", method: .get, headers: bearer).status == .ok)
            #expect(try await client.execute(uri: "/auth?acr=silver", method: .get, headers: bearer).status == .ok)
            #expect(try await client.execute(uri: "/auth?acr=gold", method: .get, headers: bearer).status == .unauthorized)
            #expect(try await client.execute(uri: "/auth?acr=eidas1", method: .get, headers: bearer).status == .unauthorized)  // not on op's scale
        }
    }

    // MARK: - Bearer endpoints

    @Test(.tags(.fast)) func bearerRefusalsCarryTheRFC6750Challenge() async throws {
        try await Fixture().test { client in
            let none = try await client.execute(uri: "/userinfo", method: .get)
            #expect(none.status == .unauthorized && none.headers[.wwwAuthenticate] == #"Bearer realm="relais""#)
            let basic = try await client.execute(uri: "/auth", method: .get, headers: [.authorization: "Basic YTpi"])
            #expect(basic.status == .badRequest && basic.headers[.wwwAuthenticate]?.contains(#"error="invalid_request""#) == true)
            let garbage = try await client.execute(uri: "/auth", method: .get, headers: [.authorization: "Bearer not.a.token"])
            #expect(garbage.status == .unauthorized && Self.json(garbage)["error"] == .string("invalid_token"))
            let introspect = try await client.execute(uri: "/introspect", method: .post, headers: Self.formHeaders, body: Self.form([("token", "t")]))
            #expect(introspect.status == .unauthorized && introspect.headers[.wwwAuthenticate] == #"Basic realm="relais""#)
        }
    }

    // MARK: - Rate limits

    @Test(.tags(.fast)) func aRateLimitWindowOpensAgainWhenTheClockMoves() async throws {
        let fixture = Fixture {
            $0.rateLimit.perIP = 2; $0.rateLimit.window = .seconds(60)
        }
        try await fixture.test { client in
            let refused = [("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", "nope")]
            for _ in 0..<2 {
                let allowed = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form(refused))
                #expect(Self.json(allowed)["error"] == .string("invalid_grant"))
            }
            let limited = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form(refused))
            #expect(limited.status == .tooManyRequests && Self.json(limited)["error"] == .string("too_many_requests"))
            let retryAfter = try #require(limited.headers[.retryAfter].flatMap(Int.init))
            #expect((1...60).contains(retryAfter))
            fixture.clock.advance(by: .seconds(retryAfter))
            let again = try await client.execute(uri: "/token", method: .post, headers: Self.formHeaders, body: Self.form(refused))
            #expect(Self.json(again)["error"] == .string("invalid_grant"))
        }
    }

    // MARK: - Discovery

    @Test(.tags(.fast)) func metadataNamesEveryEndpointUnderTheIssuer() async throws {
        try await Fixture().test { client in
            let response = try await client.execute(uri: "/.well-known/openid-configuration", method: .get)
            #expect(response.headers[.cacheControl] == "public, max-age=300")
            let document = Self.json(response)
            #expect(document["issuer"] == .string(Self.issuer))
            for (name, path) in [("authorization_endpoint", "/authorize"), ("token_endpoint", "/token"), ("jwks_uri", "/jwks.json"), ("revocation_endpoint", "/revoke")] {
                #expect(document[name] == .string(Self.issuer + path))
            }
            #expect(document["scopes_supported"] == .array([.string("openid"), .string("profile")]))
        }
    }
}
