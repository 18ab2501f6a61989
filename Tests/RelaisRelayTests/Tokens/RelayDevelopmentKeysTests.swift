import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisRelay

/// Generated development keys live in the store; when the store loses them (Redis restarted
/// without persistence), instances converge on one key again instead of failing each other.
@Suite struct RelayDevelopmentKeysTests {
    typealias Route = RelayRouteTests

    static func application(_ fixture: Route.Fixture, _ http: HTTPClient) async throws -> (some ApplicationProtocol, Relay) {
        let relay = try await Relay(configuration: fixture.configuration, store: fixture.store, httpClient: http, clock: fixture.clock)
        let router = RelaisApplication.makeRouter(
            configuration: fixture.configuration, dependencies: RelaisDependencies(store: fixture.store, httpClient: http), additionalRoutes: relay.register(on:)
        )
        return (Application(router: router, logger: Logger(label: "relay-keys-tests") { _ in SwiftLogNoOpLogHandler() }), relay)
    }

    /// One round of ``RelayKeySync``, the service that checks the keys every 5 s.
    static func syncRound(_ relay: Relay) async throws {
        let waits = Mutex<[Duration]>([])
        let sync = RelayKeySync { interval in
            let count = waits.withLock {
                $0.append(interval); return $0.count
            }
            if count == 2 { throw CancellationError() }
        }
        sync.follow(relay)
        try await sync.run()
        #expect(waits.withLock { $0 } == [RelayKeys.checkInterval, RelayKeys.checkInterval])
    }

    /// The published keys of one type (`EC`: access tokens; `RSA`: RS256 id_tokens), newest first.
    static func keyIDs(_ client: any TestClientProtocol, type: String = "EC") async throws -> [String] {
        let response = try await client.execute(uri: "/jwks.json", method: .get)
        let keys = JSONValue.object(from: Array(buffer: response.body))?["keys"]?.arrayValue?.compactMap(\.objectValue) ?? []
        return keys.filter { $0["kty"]?.stringValue == type }.compactMap { $0["kid"]?.stringValue }
    }

    @Test func instancesConvergeOnOneKeyAfterTheStoreLostIt() async throws {
        let fixture = Route.Fixture()
        let http = HTTPClient(configuration: .init())
        let (first, firstRelay) = try await Self.application(fixture, http)
        // Redis loses everything; a second instance starts and generates keys of its own.
        for key in [RelayStore.Key.signingKey, RelayStore.Key.sessionKey] { _ = try await fixture.store.delete(key) }
        let (second, _) = try await Self.application(fixture, http)
        try await first.test(.router) { one in
            try await second.test(.router) { two in
                let firstKeys = try await Self.keyIDs(one)
                let secondKeys = try await Self.keyIDs(two)
                #expect(firstKeys.count == 1 && secondKeys.count == 1 && firstKeys != secondKeys)

                // A sign-in sealed with the second instance's key is redeemed at the first: it
                // checks the store, adopts the second's keys, and its tokens work at the second.
                fixture.clock.advance(by: .seconds(2))
                let token = try await Route.accessToken(fixture, one)
                let kid = try JWS.parse(token).keyID
                #expect(kid == secondKeys.first)
                #expect(try await two.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer \(token)"]).status == .ok)
                // The first still publishes its previous key, for what it signed before.
                #expect(try await Self.keyIDs(one) == secondKeys + firstKeys)

                // Both share the RSA key the first made (the store kept it).
                let rsaKeys = try await Self.keyIDs(one, type: "RSA")
                #expect(rsaKeys.count == 1 && rsaKeys.first?.hasPrefix("dev-rsa-") == true)
                #expect(try await Self.keyIDs(two, type: "RSA") == rsaKeys)

                // The store loses the keys again: the next periodic check puts the active keys back,
                // and an instance starting then adopts them.
                for key in [RelayStore.Key.signingKey, RelayStore.Key.rsaSigningKey, RelayStore.Key.sessionKey] { _ = try await fixture.store.delete(key) }
                fixture.clock.advance(by: .seconds(6))
                try await Self.syncRound(firstRelay)
                #expect(try await Self.keyIDs(one).first == secondKeys.first)
                let (third, _) = try await Self.application(fixture, http)
                try await third.test(.router) { (three: any TestClientProtocol) async throws -> Void in
                    #expect(try await Self.keyIDs(three) == secondKeys)
                    #expect(try await Self.keyIDs(three, type: "RSA") == rsaKeys)
                    #expect(try await three.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer \(token)"]).status == .ok)
                }
            }
        }
        try await http.shutdown()
    }

    /// An instance adopting one ES256 key after another (instances restarted against a Redis that
    /// lost its keys) keeps publishing the RS256 key that signs id_tokens: keys are kept per type.
    @Test func adoptingManyECKeysKeepsTheRSAKeyPublished() async throws {
        let fixture = Route.Fixture()
        let http = HTTPClient(configuration: .init())
        let (first, firstRelay) = try await Self.application(fixture, http)
        try await first.test(.router) { one in
            let rsa = try await Self.keyIDs(one, type: "RSA")
            #expect(rsa.count == 1)
            for _ in 0..<5 {
                _ = try await fixture.store.delete(RelayStore.Key.signingKey)
                _ = try await Self.application(fixture, http)  // a new instance makes its own and stores it
                fixture.clock.advance(by: .seconds(6))
                try await Self.syncRound(firstRelay)
            }
            #expect(try await Self.keyIDs(one, type: "RSA") == rsa)
            #expect(try await Self.keyIDs(one).count == RelayKeys.keptPrevious + 1)
        }
        try await http.shutdown()
    }

    /// Configured keys never follow the store, and a session sealed with a key no longer
    /// configured sends the app back to sign-in (invalid_grant), not into a 5xx loop; with
    /// generated keys that have not converged yet, the app is asked to retry (503).
    @Test(.tags(.fast), arguments: [true, false])
    func aSignInSealedWithAnUnknownKey(configured: Bool) async throws {
        let fixture = Route.Fixture { configuration in
            guard configured else { return }
            configuration.keys.sessionKeys = [(id: "k-new", key: Array(repeating: 7, count: 32))]
            configuration.keys.activeSessionKey = "k-new"
        }
        try await fixture.test { client in
            let other = JWK(symmetric: Array(repeating: 9, count: 32), keyID: "k-removed", algorithm: "dir")
            let sealed = try JWE.encrypt(Array(#"{"claims":{},"providerIDToken":"x"}"#.utf8), to: other, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
            let verifier = String(repeating: "v", count: 43)
            let app = AppRequest(
                clientID: "app", redirectURI: Route.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: nil,
                providerID: "fc", acr: "eidas1", forceLogin: false
            )
            let sid = RelayStore.newSessionID()
            let vault = SessionVault(keys: try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions))
            let code = try SealedCode(
                sid: sid, record: RelayCode(app: app, subject: "sub-1", acr: nil, sealedIdentity: sealed, providerSessionID: nil), expiresAt: fixture.sessions.clock.now + 60
            ).seal(with: vault)
            let response = try await client.execute(
                uri: "/token", method: .post, headers: Route.formHeaders,
                body: Route.form([("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", Route.redirect), ("code_verifier", verifier)])
            )
            if configured {
                #expect(response.status == .badRequest)
                #expect(Route.json(response)["error"] == .string("invalid_grant"))
                #expect(Route.json(response)["error_description"] == .string("the sign-in was sealed with a session key that is no longer configured; sign in again"))
            } else {
                #expect(response.status == .serviceUnavailable)
                #expect(Route.json(response)["error"] == .string("temporarily_unavailable"))
            }
            // Not used up: once the keys agree, the same code can still be redeemed.
            #expect(try await fixture.sessions.store.get(RelayStore.Key.usedCode(sid)) == nil)
        }
    }
}
