import Crypto
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisAttest
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Attestation-based client authentication through the relay's routes: a challenge, a platform
/// proof (App Attest, Play Integrity, the development attester), the Client Attestation JWT, and
/// its use with a PoP at `/token`; sessions and tokens that remember it; `/auth?attested=1`.
@Suite(.tags(.fast)) struct RelayAttestationTests {
    typealias Route = RelayRouteTests
    typealias DPoP = RelayDPoPTests

    static let attestHeader = HTTPField.Name("OAuth-Client-Attestation")!
    static let popHeader = HTTPField.Name("OAuth-Client-Attestation-PoP")!

    static func fixture(_ policy: AppSettings.AttestationPolicy = .required, _ change: @escaping (inout RelaisConfiguration) -> Void = { _ in }) -> Route.Fixture {
        Route.Fixture { configuration in
            configuration.relay.devAttester = true
            configuration.apps[0].attestation = policy
            change(&configuration)
        }
    }

    /// The app instance: its key signs the attestation PoPs.
    struct Instance {
        let key: JWK
        let clock: ManualClock
        var clientID = "app"

        init(_ clock: ManualClock) throws {
            key = try JWK.generate(for: .es256)
            self.clock = clock
        }

        var jwk: String { String(decoding: JSONValue.object(key.publicJSON() ?? [:]).serialized(), as: UTF8.self) }

        func pop(
            audience: String = Route.issuer, type: String = "oauth-client-attestation-pop+jwt", age: Double = 0, issuer: String? = nil, challenge: String? = nil,
            jti: String = SecureRandom.token(bits: 96), signer: JWK? = nil
        ) throws -> String {
            var claims: [String: JSONValue] = ["aud": .string(audience), "jti": .string(jti), "iat": .number((clock.now - age).rounded(.down))]
            claims["iss"] = .string(issuer ?? clientID)
            if let challenge { claims["challenge"] = .string(challenge) }
            return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: signer ?? key, algorithm: .es256, extraHeader: ["typ": .string(type)])
        }

        func headers(_ attestation: String, pop: String? = nil) throws -> HTTPFields {
            [attestHeader: attestation, popHeader: try pop ?? self.pop()]
        }
    }

    static func challenge(_ client: any TestClientProtocol, clientID: String = "app") async throws -> String {
        let response = try await client.execute(uri: "/attest/challenge", method: .post, headers: Route.formHeaders, body: Route.form([("client_id", clientID)]))
        #expect(response.status == .ok)
        return try #require(Route.json(response)["attestation_challenge"]?.stringValue)
    }

    static func post(_ client: any TestClientProtocol, _ path: String, _ fields: [(String, String)]) async throws -> TestResponse {
        try await client.execute(uri: path, method: .post, headers: Route.formHeaders, body: Route.form(fields))
    }

    /// A Client Attestation JWT from the development attester.
    static func devAttestation(_ client: any TestClientProtocol, _ instance: Instance) async throws -> String {
        let challenge = try await challenge(client)
        let response = try await post(client, "/attest/dev", [("client_id", "app"), ("challenge", challenge), ("jwk", instance.jwk)])
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try #require(Route.json(response)["client_attestation"]?.stringValue)
    }

    static func refusal(_ response: TestResponse) -> (HTTPResponse.Status, String, String) {
        let body = Route.json(response)
        return (response.status, body["error"]?.stringValue ?? "", body["error_description"]?.stringValue ?? "")
    }

    // MARK: The attested path

    @Test func theDevelopmentAttesterWalksTheWholePath() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let instance = try Instance(fixture.clock)
            // required: no attestation, no tokens.
            let bare = try await DPoP.redeem(fixture, client, headers: [:])
            #expect(Self.refusal(bare).1 == "invalid_client_attestation")

            let attestation = try await Self.devAttestation(client, instance)
            let claims = try DPoP.claims(attestation)
            #expect(try JWS.parse(attestation).header["typ"] == .string("oauth-client-attestation+jwt"))
            #expect(claims["sub"] == .string("app"))
            #expect(claims["iss"] == .string(Route.issuer))
            #expect(claims["platform"] == .string("dev"))
            #expect(claims["cnf"]?.objectValue?["jwk"] == .object(instance.key.publicJSON() ?? [:]))

            let tokens = try await DPoP.redeem(fixture, client, headers: try instance.headers(attestation))
            #expect(tokens.status == .ok, "\(String(buffer: tokens.body))")
            let body = Route.json(tokens)
            let access = try #require(body["access_token"]?.stringValue)
            #expect(try DPoP.claims(access)["attested"] == .string("dev"))
            let sid = try #require(try DPoP.claims(access)["sid"]?.stringValue)
            let session = try #require(try await fixture.sessions.session(sid))
            #expect(session.origin.attested == ClientAttested(platform: "dev", thumbprint: instance.key.thumbprint()))

            // Refreshes come from the same instance, with a fresh PoP each time.
            let refreshToken = try #require(body["refresh_token"]?.stringValue)
            let unattested = try await DPoP.refresh(client, refreshToken, proof: nil)
            #expect(Self.refusal(unattested).1 == "invalid_client_attestation")
            let stranger = try Instance(fixture.clock)
            let strangerAttestation = try await Self.devAttestation(client, stranger)
            let other = try await Self.refreshing(client, refreshToken, headers: try stranger.headers(strangerAttestation))
            #expect(Self.refusal(other).2.contains("that instance"))
            let pop = try instance.pop()
            let refreshed = try await Self.refreshing(client, refreshToken, headers: try instance.headers(attestation, pop: pop))
            #expect(refreshed.status == .ok)
            let next = try #require(Route.json(refreshed)["refresh_token"]?.stringValue)
            let replayed = try await Self.refreshing(client, next, headers: try instance.headers(attestation, pop: pop))
            #expect(Self.refusal(replayed).2.contains("jti"))

            // Gateways: the token opens `/auth?attested=1` and says how the app was attested.
            let auth = try await client.execute(uri: "/auth?attested=1", method: .get, headers: [.authorization: "Bearer \(access)"])
            #expect(auth.status == .ok)
            #expect(auth.headers[HTTPField.Name("X-Relais-Attested")!] == "dev")
        }
    }

    static func refreshing(_ client: any TestClientProtocol, _ token: String, headers: HTTPFields) async throws -> TestResponse {
        var all = Route.formHeaders
        all.append(contentsOf: headers)
        return try await client.execute(
            uri: "/token", method: .post, headers: all, body: Route.form([("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", token)]))
    }

    /// The demo page offers the attested path only when every piece of it is there: the development
    /// attester, and an app that uses both attestation and DPoP.
    @Test(arguments: [
        (true, AppSettings.AttestationPolicy.allowed, AppSettings.DPoPPolicy.allowed, true),
        (false, .allowed, .allowed, false),
        (true, .off, .allowed, false),
        (true, .required, .off, false),
    ])
    func theDemoPageOffersTheAttestedPathWhenItCanWork(devAttester: Bool, attestation: AppSettings.AttestationPolicy, dpop: AppSettings.DPoPPolicy, offered: Bool) async throws {
        let fixture = Self.fixture(attestation) { configuration in
            configuration.relay.devAttester = devAttester
            configuration.apps[0].dpop = dpop
            configuration.apps[0].redirectURIs.append(Route.issuer + "/demo/callback")
        }
        try await fixture.test { client in
            let page = try await client.execute(uri: "/demo/", method: .get)
            #expect(page.status == .ok)
            let html = String(buffer: page.body)
            #expect(html.contains("id=\"attested\"") == offered)
            #expect(html.contains("const issuer = \"\(Route.issuer)\""))
        }
    }

    @Test func allowedAppsMayGoUnattestedButAuthCanRequireIt() async throws {
        let fixture = Self.fixture(.allowed)
        try await fixture.test { client in
            let response = try await DPoP.redeem(fixture, client, headers: [:])
            #expect(response.status == .ok)
            let access = try #require(Route.json(response)["access_token"]?.stringValue)
            #expect(try DPoP.claims(access)["attested"] == nil)
            let plain = try await client.execute(uri: "/auth", method: .get, headers: [.authorization: "Bearer \(access)"])
            #expect(plain.status == .ok)
            #expect(plain.headers[HTTPField.Name("X-Relais-Attested")!] == "")
            let required = try await client.execute(uri: "/auth?attested=1", method: .get, headers: [.authorization: "Bearer \(access)"])
            #expect(required.status == .forbidden)
            #expect(Self.refusal(required).1 == "attestation_required")
            #expect(required.headers[.wwwAuthenticate]?.contains("attestation_required") == true)
        }
    }

    @Test func eachPoPCheckIsItsOwnRefusal() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let instance = try Instance(fixture.clock)
            let attestation = try await Self.devAttestation(client, instance)
            let stranger = try JWK.generate(for: .es256)
            let cases: [(HTTPFields, String)] = [
                ([Self.attestHeader: attestation], "exactly one"),
                ([Self.popHeader: try instance.pop()], "exactly one"),
                (try instance.headers("not-a-jwt"), "compact JWS"),
                (try instance.headers(attestation, pop: try instance.pop(signer: stranger)), "not signed by the attested instance key"),
                (try instance.headers(attestation, pop: try instance.pop(audience: "https://other.example")), "aud"),
                (try instance.headers(attestation, pop: try instance.pop(type: "JWT")), "jwt_typ"),
                (try instance.headers(attestation, pop: try instance.pop(age: 300)), "not valid"),
                (try instance.headers(attestation, pop: try instance.pop(issuer: "other-app")), "another client"),
                (try instance.headers(attestation, pop: try instance.pop(challenge: "never-issued")), "challenge"),
            ]
            for (headers, expected) in cases {
                let response = try await DPoP.redeem(fixture, client, headers: headers)
                let (status, error, description) = Self.refusal(response)
                #expect(status == .badRequest)
                #expect(error == "invalid_client_attestation", "\(expected)")
                #expect(description.contains(expected), "\(description) should say \(expected)")
            }
            // A challenge from /attest/challenge is accepted once in a PoP.
            let challenge = try await Self.challenge(client)
            let withChallenge = try await DPoP.redeem(fixture, client, headers: try instance.headers(attestation, pop: try instance.pop(challenge: challenge)))
            #expect(withChallenge.status == .ok)
            let again = try await DPoP.redeem(fixture, client, headers: try instance.headers(attestation, pop: try instance.pop(challenge: challenge)))
            #expect(Self.refusal(again).2.contains("challenge"))

            // An expired attestation: the app must attest again.
            fixture.clock.advance(by: .seconds(3610))
            let expired = try await DPoP.redeem(fixture, client, headers: try instance.headers(attestation))
            #expect(Self.refusal(expired).1 == "use_fresh_attestation", "\(expired.status) \(String(buffer: expired.body))")
        }
    }

    @Test func attestationsFromElsewhereAreRefusedUnlessTheAppTrustsTheAttester() async throws {
        let attesterKey = try JWK.generate(for: .es256, keyID: "attester-1")
        let fixture = Self.fixture { configuration in
            configuration.apps[0].attester = AppSettings.ExternalAttester(issuer: "https://attester.example.fr", keys: JWKSet(keys: [attesterKey]))
        }
        try await fixture.test { client in
            let instance = try Instance(fixture.clock)
            func attestation(issuer: String, subject: String = "app", key: JWK) throws -> String {
                let now = fixture.clock.now.rounded(.down)
                let claims: JSONValue = .object([
                    "iss": .string(issuer), "sub": .string(subject), "iat": .number(now), "exp": .number(now + 600),
                    "cnf": .object(["jwk": .object(instance.key.publicJSON() ?? [:])]),
                ])
                return try JWS.sign(payload: claims.serialized(), with: key, algorithm: .es256, extraHeader: ["typ": .string("oauth-client-attestation+jwt")])
            }
            let trusted = try await DPoP.redeem(fixture, client, headers: try instance.headers(try attestation(issuer: "https://attester.example.fr", key: attesterKey)))
            #expect(trusted.status == .ok)
            let access = try #require(Route.json(trusted)["access_token"]?.stringValue)
            #expect(try DPoP.claims(access)["attested"] == .string("external"))

            let forged = try JWK.generate(for: .es256, keyID: "attester-1")
            for (token, expected) in [
                (try attestation(issuer: "https://attester.example.fr", key: forged), "signature"),
                (try attestation(issuer: "https://unknown.example", key: attesterKey), "not an attester this app trusts"),
                (try attestation(issuer: "https://attester.example.fr", subject: "other", key: attesterKey), "another client"),
            ] {
                let response = try await DPoP.redeem(fixture, client, headers: try instance.headers(token))
                #expect(Self.refusal(response).1 == "invalid_client_attestation")
                #expect(Self.refusal(response).2.contains(expected), "\(Self.refusal(response).2)")
            }
        }
    }

    // MARK: The attester endpoints

    @Test func challengesServeOnceForTheirApp() async throws {
        let fixture = Self.fixture { configuration in
            var other = AppSettings(clientID: "other", redirectURIs: [Route.redirect], providers: ["fc"], scopes: ["openid"])
            other.attestation = .allowed
            configuration.apps.append(other)
            configuration.apps.append(AppSettings(clientID: "plain", redirectURIs: [Route.redirect], providers: ["fc"], scopes: ["openid"]))
        }
        try await fixture.test { client in
            let instance = try Instance(fixture.clock)
            let challenge = try await Self.challenge(client)
            let foreign = try await Self.post(client, "/attest/dev", [("client_id", "other"), ("challenge", challenge), ("jwk", instance.jwk)])
            #expect(Self.refusal(foreign).1 == "attestation_refused")
            #expect(Self.refusal(foreign).2.hasPrefix("attestation_challenge"))
            // The foreign attempt used it up too: a challenge serves once, whoever presents it.
            let used = try await Self.post(client, "/attest/dev", [("client_id", "app"), ("challenge", challenge), ("jwk", instance.jwk)])
            #expect(Self.refusal(used).2.hasPrefix("attestation_challenge"))

            let expiring = try await Self.challenge(client)
            fixture.clock.advance(by: .seconds(301))
            let late = try await Self.post(client, "/attest/dev", [("client_id", "app"), ("challenge", expiring), ("jwk", instance.jwk)])
            #expect(Self.refusal(late).2.hasPrefix("attestation_challenge"))

            let plain = try await Self.post(client, "/attest/challenge", [("client_id", "plain")])
            #expect(Self.refusal(plain).1 == "invalid_client")
            let unknown = try await Self.post(client, "/attest/challenge", [("client_id", "nobody")])
            #expect(Self.refusal(unknown).1 == "invalid_client")
            let fresh = try await Self.challenge(client)
            let symmetric = String(decoding: JSONValue.object(["kty": .string("oct"), "k": .string(Base64URL.encode(SecureRandom.bytes(32)))]).serialized(), as: UTF8.self)
            for jwk in ["{", symmetric] {
                let response = try await Self.post(client, "/attest/dev", [("client_id", "app"), ("challenge", fresh), ("jwk", jwk)])
                #expect(Self.refusal(response).1 == "invalid_request")
                #expect(Self.refusal(response).2.contains("jwk"))
            }
            let missing = try await Self.post(client, "/attest/dev", [("client_id", "app"), ("jwk", instance.jwk)])
            #expect(Self.refusal(missing).2.contains("challenge is missing"))
        }
    }

    @Test func theDevelopmentAttesterIsOnlyThereWhenConfigured() async throws {
        let fixture = Self.fixture(.allowed) { $0.relay.devAttester = false }
        try await fixture.test { client in
            let instance = try Instance(fixture.clock)
            let challenge = try await Self.challenge(client)
            let response = try await Self.post(client, "/attest/dev", [("client_id", "app"), ("challenge", challenge), ("jwk", instance.jwk)])
            #expect(response.status == .notFound)
        }
    }

    @Test func appAttestAttestationThenAssertions() async throws {
        let factory = try AppAttestFactory()
        let fixture = Self.fixture { configuration in
            configuration.apps[0].apple = AppSettings.AppleAttestation(
                verifier: AppAttestVerifier(appID: AppAttestFactory.appID, environment: .development, roots: [factory.root])
            )
        }
        try await fixture.test { client in
            let instance = try Instance(fixture.clock)
            let keyID = Base64.encode(factory.keyID)
            func clientData(_ challenge: String, jkt: String? = nil) -> [UInt8] {
                JSONValue.object(["challenge": .string(challenge), "jkt": .string(jkt ?? instance.key.thumbprint())]).serialized()
            }
            func attest(_ data: [UInt8], object: [UInt8]? = nil) async throws -> TestResponse {
                let object = try object ?? factory.attestation(clientDataHash: RelaisCrypto.SHA256.hash(data))
                return try await Self.post(
                    client, "/attest/apple",
                    [
                        ("client_id", "app"), ("key_id", keyID), ("attestation", Base64.encode(object)), ("client_data", Base64URL.encode(data)), ("jwk", instance.jwk),
                    ])
            }
            func assert(_ data: [UInt8], counter: UInt32, key: String? = nil) async throws -> TestResponse {
                let assertion = try factory.assertion(clientData: data, counter: counter)
                return try await Self.post(
                    client, "/attest/apple/assertion",
                    [
                        ("client_id", "app"), ("key_id", key ?? keyID), ("assertion", Base64.encode(assertion)), ("client_data", Base64URL.encode(data)), ("jwk", instance.jwk),
                    ])
            }

            // Assertions need an attested key first.
            let early = try await assert(clientData(try await Self.challenge(client)), counter: 1)
            #expect(Self.refusal(early).2.hasPrefix("apple_assertion_unknown_key"))

            // The client data must name this instance's key.
            let mismatch = try await attest(clientData(try await Self.challenge(client), jkt: "another-key"))
            #expect(Self.refusal(mismatch).2.hasPrefix("attestation_key_mismatch"))
            // Another app's attestation: each refusal carries the platform's code.
            let otherApp = clientData(try await Self.challenge(client))
            let foreign = try await attest(
                otherApp, object: try factory.attestation(clientDataHash: RelaisCrypto.SHA256.hash(otherApp)) { $0.appID = "ABCDE12345.fr.example.other" })
            #expect(Self.refusal(foreign).2.hasPrefix("apple_attestation_app_id"))

            let data = clientData(try await Self.challenge(client))
            let attested = try await attest(data)
            #expect(attested.status == .ok, "\(String(buffer: attested.body))")
            #expect(try DPoP.claims(try #require(Route.json(attested)["client_attestation"]?.stringValue))["platform"] == .string("ios"))
            // Its challenge served once.
            let replay = try await attest(data)
            #expect(Self.refusal(replay).2.hasPrefix("attestation_challenge"))

            // Later: assertions with a growing counter; a counter that does not grow is refused.
            let first = try await assert(clientData(try await Self.challenge(client)), counter: 1)
            #expect(first.status == .ok, "\(String(buffer: first.body))")
            let stale = try await assert(clientData(try await Self.challenge(client)), counter: 1)
            #expect(Self.refusal(stale).2.hasPrefix("apple_assertion_counter"))
            let second = try await assert(clientData(try await Self.challenge(client)), counter: 5)
            #expect(second.status == .ok)
            let stored = try await fixture.sessions.appAttestKey(clientID: "app", keyID: Base64URL.encode(factory.keyID))
            #expect(stored?.counter == 5)
        }
    }

    @Test func playIntegrityClassicVerdicts() async throws {
        let play = try PlayIntegrityFactory()
        let fixture = Self.fixture { configuration in
            var android = AppSettings.AndroidAttestation(policy: PlayIntegrityPolicy(packageName: PlayIntegrityFactory.package, certificateDigests: [PlayIntegrityFactory.digest]))
            android.decryptionKey = play.decryptionKey
            android.verificationKey = play.verificationKey
            configuration.apps[0].android = android
        }
        try await fixture.test { client in
            let instance = try Instance(fixture.clock)
            func attest(_ change: (inout [String: JSONValue]) -> Void = { _ in }, hashKey: String? = nil, requestType: String? = nil) async throws -> TestResponse {
                let challenge = try await Self.challenge(client)
                let hash = PlayIntegrityVerifier.requestHash(challenge: challenge, thumbprint: hashKey ?? instance.key.thumbprint())
                var fields = [
                    ("client_id", "app"), ("challenge", challenge), ("jwk", instance.jwk),
                    ("integrity_token", try play.token(PlayIntegrityFactory.payload(hash: hash, now: fixture.clock.now, change))),
                ]
                if let requestType { fields.append(("request_type", requestType)) }
                return try await Self.post(client, "/attest/android", fields)
            }
            let genuine = try await attest()
            #expect(genuine.status == .ok, "\(String(buffer: genuine.body))")
            #expect(try DPoP.claims(try #require(Route.json(genuine)["client_attestation"]?.stringValue))["platform"] == .string("android"))

            #expect(Self.refusal(try await attest(hashKey: "another-instance")).2.hasPrefix("play_integrity_nonce"))
            #expect(
                Self.refusal(try await attest { $0["appIntegrity"]?.set("appRecognitionVerdict", .string("UNRECOGNIZED_VERSION")) }).2.hasPrefix("play_integrity_app_unrecognized"))
            #expect(Self.refusal(try await attest(requestType: "standard")).2.contains("service_account"))
            #expect(Self.refusal(try await attest(requestType: "other")).1 == "invalid_request")
        }
    }
}
