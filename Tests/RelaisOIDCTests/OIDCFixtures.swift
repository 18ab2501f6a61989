import Hummingbird
import NIOCore
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisOIDC

// Shared fixtures of the RelaisOIDC tests: keys, token minting, the provider double served on
// loopback, one scenario per test case, and the check that a refusal is the expected one.

/// Keys generated once per process. The provider double publishes `published`; Relais decrypts
/// with `encryptionRSA` and `encryptionEC`.
enum TestKeys {
    static let clientID = "relais-client"
    /// Long enough for HS512 (64 bytes).
    static let clientSecret = String(repeating: "s3cr3t-", count: 10)
    /// Unpinned 2048-bit RSA: serves every RS* and PS* algorithm.
    static let rsa = generate(.rs256, "rsa-1", pin: false)
    static let p256 = generate(.es256, "p256-1")
    static let p384 = generate(.es384, "p384-1")
    static let p521 = generate(.es512, "p521-1")
    static let ed25519 = generate(.edDSA, "ed-1")
    static let published = [rsa, p256, p384, p521, ed25519]
    /// A key the provider never published.
    static let stranger = generate(.es256, "stranger-1")
    /// Another key claiming the published P-256 key's kid.
    static let impostor = generate(.es256, "p256-1")
    static let encryptionRSA = generate(.rs256, "enc-rsa", use: "enc", pin: false)
    static let encryptionEC = generate(.es256, "enc-ec", use: "enc", pin: false)
    /// Relais' own key for `private_key_jwt`.
    static let clientKey = generate(.es256, "client-1")
    /// Not ours, though it carries our RSA encryption key's kid.
    static let foreignRSA = generate(.rs256, "enc-rsa", use: "enc", pin: false)

    static func generate(_ algorithm: JWSAlgorithm, _ keyID: String, use: String = "sig", pin: Bool = true) -> JWK {
        do { return try JWK.generate(for: algorithm, keyID: keyID, use: use, pinAlgorithm: pin) } catch { fatalError("\(error)") }
    }

    /// The published key (or the client secret) the provider signs `algorithm` with.
    static func signer(for algorithm: JWSAlgorithm) -> JWK {
        switch algorithm {
        case .es256: p256
        case .es384: p384
        case .es512: p521
        case .edDSA: ed25519
        case .hs256, .hs384, .hs512: JWK(symmetric: Array(clientSecret.utf8))
        default: rsa
        }
    }

    /// What a sender encrypts to: the public members only.
    static func publicHalf(_ key: JWK) throws -> JWK { try JWK(object: try #require(key.publicJSON())) }
}

/// A JWT to mint: claims, header, signer, and how it is finally shaped.
struct TokenSpec: Sendable {
    struct Encryption: Sendable {
        var keyAlgorithm: JWEKeyAlgorithm = .rsaOAEP256
        var contentAlgorithm: JWEContentAlgorithm = .a256GCM
        var recipient: JWK = TestKeys.encryptionRSA
        var cty: String? = "JWT"
        /// Encrypt the bare claims instead of the signed JWT.
        var claimsOnly = false
        /// Flip a bit of the ciphertext.
        var tampered = false
    }

    enum Shape: Sendable {
        case signed
        /// Signed, then the payload replaced (another `sub`).
        case tampered
        /// `alg: none`, empty signature.
        case unsigned
        case encrypted(Encryption)
    }

    var claims: [String: JSONValue]
    var header: [String: JSONValue] = [:]
    var algorithm: JWSAlgorithm = .es256
    /// Nil: ``TestKeys/signer(for:)``.
    var signer: JWK?
    var shape: Shape = .signed

    func compact() throws -> String {
        let payload = JSONValue.object(claims).serialized()
        if case .unsigned = shape {
            var header = self.header
            header["alg"] = .string("none")
            return Base64URL.encode(JSONValue.object(header).serialized()) + "." + Base64URL.encode(payload) + "."
        }
        let jws = try JWS.sign(payload: payload, with: signer ?? TestKeys.signer(for: algorithm), algorithm: algorithm, extraHeader: header)
        switch shape {
        case .signed, .unsigned:
            return jws
        case .tampered:
            var parts = jws.split(separator: ".").map(String.init)
            var forged = claims
            forged["sub"] = .string("someone-else")
            parts[1] = Base64URL.encode(JSONValue.object(forged).serialized())
            return parts.joined(separator: ".")
        case .encrypted(let encryption):
            let plaintext = encryption.claimsOnly ? payload : Array(jws.utf8)
            let extra: [String: JSONValue] = encryption.cty.map { ["cty": .string($0)] } ?? [:]
            let jwe = try JWE.encrypt(
                plaintext, to: TestKeys.publicHalf(encryption.recipient), keyAlgorithm: encryption.keyAlgorithm,
                contentAlgorithm: encryption.contentAlgorithm, extraHeader: extra
            )
            guard encryption.tampered else { return jwe }
            var parts = jwe.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            var ciphertext = try #require(Base64URL.decode(parts[3]))
            ciphertext[0] ^= 1
            parts[3] = Base64URL.encode(ciphertext)
            return parts.joined(separator: ".")
        }
    }
}

/// Everything one test case sets up: Relais' settings and what the provider double answers.
/// Built once the server listens (the issuer holds its port); each case adjusts the defaults.
struct Scenario: Sendable {
    enum UserinfoBody: Sendable {
        case json
        /// The `userinfo` token minted, served as `application/jwt`.
        case jwt
        /// The `userinfo` token, with `before` and `after` around it (whitespace a provider may add).
        case jwtWrapped(before: String, after: String)
        case raw(String, contentType: String)
    }

    let issuer: String
    let now: Double
    var settings: ProviderSettings
    var nonce = "nonce-1"
    var requestedACR: String? = "eidas2"
    /// Moved on the clock after minting, before the test body runs.
    var advance: Duration = .zero

    var discovery: [String: JSONValue]
    var discoveryStatus = 200
    var jwksStatus = 200

    var idToken: TokenSpec
    var tokenStatus = 200
    var tokenFields: [String: JSONValue] = ["access_token": .string(AccessTokenHash.accessToken), "token_type": .string("Bearer"), "expires_in": .number(60)]
    var tokenIncludesIDToken = true
    /// Replaces the whole token response body.
    var tokenRawBody: String?

    var userinfo: TokenSpec
    var userinfoBody = UserinfoBody.json
    var userinfoStatus = 200

    var logoutToken: TokenSpec

    init(issuer: String, now: Double) {
        self.issuer = issuer
        self.now = now
        settings = ProviderSettings(id: "test", preset: .oidc, issuer: issuer, clientID: TestKeys.clientID)
        settings.clientSecret = TestKeys.clientSecret
        settings.acrOrder = ["eidas1", "eidas2", "eidas3"]
        settings.idTokenAlgorithms = [.es256, .rs256]
        settings.decryptionKeys = [TestKeys.encryptionRSA, TestKeys.encryptionEC]
        settings.timeout = .seconds(10)
        discovery = [
            "issuer": .string(issuer), "authorization_endpoint": .string(issuer + "/authorize"),
            "token_endpoint": .string(issuer + "/token"), "userinfo_endpoint": .string(issuer + "/userinfo"),
            "jwks_uri": .string(issuer + "/jwks"), "end_session_endpoint": .string(issuer + "/logout"),
        ]
        let registered: [String: JSONValue] = ["iss": .string(issuer), "aud": .string(TestKeys.clientID), "iat": .number(now)]
        idToken = TokenSpec(
            claims: registered.merging([
                "sub": .string("user-1"), "nonce": .string("nonce-1"), "exp": .number(now + 60), "acr": .string("eidas2"),
                "sid": .string("session-1"), "given_name": .string("Angela"),
            ]) { $1 })
        userinfo = TokenSpec(
            claims: registered.merging([
                "sub": .string("user-1"), "family_name": .string("Dubois"), "email": .string("angela@example.test"),
            ]) { $1 })
        logoutToken = TokenSpec(
            claims: registered.merging([
                "jti": .string("jti-1"), "sub": .string("user-1"), "sid": .string("session-1"),
                "events": .object([UpstreamProvider.logoutEvent: .object([:])]),
            ]) { $1 },
            header: ["typ": .string("logout+jwt")]
        )
    }
}

/// The provider as Relais sees it over HTTP: discovery, JWKS, token and userinfo endpoints, each
/// answering what the scenario says and counting its requests.
final class ProviderDouble: Sendable {
    enum Endpoint: String, CaseIterable, Sendable {
        case discovery = "/.well-known/openid-configuration", jwks = "/jwks", token = "/token", userinfo = "/userinfo"
    }

    struct Reply: Sendable {
        var status = 200
        var body: [UInt8] = []
        var contentType = "application/json"
    }

    private struct State {
        var replies: [Endpoint: Reply] = [:]
        var hits: [Endpoint: Int] = [:]
        var lastRequest: [Endpoint: (authorization: String?, body: String)] = [:]
    }

    static let pathPrefix = "/api/v2"
    private let state = Mutex(State())

    func reply(_ endpoint: Endpoint, _ reply: Reply) { state.withLock { $0.replies[endpoint] = reply } }
    func hits(_ endpoint: Endpoint) -> Int { state.withLock { $0.hits[endpoint] ?? 0 } }
    func lastRequest(_ endpoint: Endpoint) -> (authorization: String?, body: String)? { state.withLock { $0.lastRequest[endpoint] } }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        for endpoint in Endpoint.allCases {
            router.on(RouterPath(Self.pathPrefix + endpoint.rawValue), method: endpoint == .token ? .post : .get) { request, _ in
                let body = try await request.body.collect(upTo: 1 << 16)
                let reply = self.state.withLock { state in
                    state.hits[endpoint, default: 0] += 1
                    state.lastRequest[endpoint] = (request.headers[.authorization], String(buffer: body))
                    return state.replies[endpoint] ?? Reply(status: 404)
                }
                return Response(
                    status: .init(code: reply.status), headers: [.contentType: reply.contentType],
                    body: .init(byteBuffer: ByteBuffer(bytes: reply.body))
                )
            }
        }
        return router
    }

    /// Sets every endpoint's reply from the scenario; returns the id_token minted.
    func install(_ scenario: Scenario) throws -> String {
        let idToken = try scenario.idToken.compact()
        reply(.discovery, Reply(status: scenario.discoveryStatus, body: JSONValue.object(scenario.discovery).serialized()))
        reply(.jwks, Reply(status: scenario.jwksStatus, body: JWKSet(keys: TestKeys.published).publicJSON()))
        var fields = scenario.tokenFields
        if scenario.tokenIncludesIDToken { fields["id_token"] = .string(idToken) }
        reply(.token, Reply(status: scenario.tokenStatus, body: scenario.tokenRawBody.map { Array($0.utf8) } ?? JSONValue.object(fields).serialized()))
        switch scenario.userinfoBody {
        case .json: reply(.userinfo, Reply(status: scenario.userinfoStatus, body: JSONValue.object(scenario.userinfo.claims).serialized()))
        case .jwt: reply(.userinfo, Reply(status: scenario.userinfoStatus, body: Array(try scenario.userinfo.compact().utf8), contentType: "application/jwt"))
        case .jwtWrapped(let before, let after):
            let body = Array((before + (try scenario.userinfo.compact()) + after).utf8)
            reply(.userinfo, Reply(status: scenario.userinfoStatus, body: body, contentType: "application/jwt"))
        case .raw(let text, let type): reply(.userinfo, Reply(status: scenario.userinfoStatus, body: Array(text.utf8), contentType: type))
        }
        return idToken
    }
}

/// A running provider double and the `UpstreamProvider` under test, pointed at it.
struct Harness: Sendable {
    static let start = 1_800_000_000.0

    let provider: UpstreamProvider
    let double: ProviderDouble
    let clock: ManualClock
    let scenario: Scenario
    let idToken: String

    /// Serves the double, applies `setup` to the default scenario, then runs `body`.
    static func run(_ setup: @Sendable (inout Scenario) -> Void = { _ in }, _ body: @Sendable (Harness) async throws -> Void) async throws {
        let double = ProviderDouble()
        try await LoopbackHTTPServer.with(router: double.router()) { server in
            let clock = ManualClock(wall: start)
            var scenario = Scenario(issuer: server.baseURL + ProviderDouble.pathPrefix, now: clock.now)
            setup(&scenario)
            let idToken = try double.install(scenario)
            clock.advance(by: scenario.advance)
            let http = HTTPClient(configuration: .init(maxConcurrentRequests: 2))
            let harness = Harness(
                provider: UpstreamProvider(settings: scenario.settings, http: http, clock: clock), double: double, clock: clock,
                scenario: scenario, idToken: idToken
            )
            do {
                try await body(harness)
                try await http.shutdown()
            } catch {
                try await http.shutdown()
                throw error
            }
        }
    }

    func verifyIDToken() async throws(UpstreamError) -> VerifiedClaims {
        try await provider.verifyIDToken(
            idToken, nonce: scenario.nonce, requestedACR: scenario.requestedACR, accessToken: scenario.tokenFields["access_token"]?.stringValue)
    }

    func signIn() async throws(UpstreamError) -> UpstreamIdentity {
        try await provider.signIn(
            code: "code-1", redirectURI: "https://relais.example/callback", nonce: scenario.nonce, requestedACR: scenario.requestedACR, codeVerifier: "verifier-1")
    }
}

/// What a case expects: success, or a refusal with this `UpstreamError` code whose failed check is
/// `check` (the JOSEError code inside `.idTokenRejected`, exactly; a part of the reason otherwise).
enum Expected: Sendable, CustomStringConvertible {
    case accepted
    case refused(_ code: String, check: String, mentioning: String? = nil)

    var description: String {
        switch self {
        case .accepted: "accepted"
        case .refused(let code, let check, let mention): "\(code) / \(check)" + (mention.map { " / '\($0)'" } ?? "")
        }
    }

    /// Runs `work` and checks its outcome; returns the value when it succeeded.
    @discardableResult
    func verify<T>(sourceLocation: SourceLocation = #_sourceLocation, _ work: () async throws(UpstreamError) -> T) async -> T? {
        do {
            let value = try await work()
            if case .refused = self { Issue.record("accepted, expected \(self)", sourceLocation: sourceLocation) }
            return value
        } catch {
            guard case .refused(let code, let check, let mention) = self else {
                Issue.record("refused (\(error)), expected acceptance", sourceLocation: sourceLocation)
                return nil
            }
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            let matches: Bool
            switch error {
            case .idTokenRejected(let jose): matches = jose.code == check
            case .rejected(let oauthError, _): matches = oauthError == check
            case .unavailable(let reason), .invalidResponse(let reason), .userinfoRejected(let reason), .callbackRejected(let reason),
                .logoutTokenRejected(let reason):
                matches = reason.contains(check)
            }
            #expect(matches, "failed check is not '\(check)': \(error)", sourceLocation: sourceLocation)
            if let mention {
                let detail = if case .idTokenRejected(let jose) = error { jose.description } else { error.description }
                #expect(detail.contains(mention), "'\(mention)' not in \(detail)", sourceLocation: sourceLocation)
            }
            return nil
        }
    }
}

/// One named row of a table: how the scenario differs from the default, and the outcome.
struct Case: Sendable, CustomTestStringConvertible {
    let name: String
    let expected: Expected
    let setup: @Sendable (inout Scenario) -> Void

    init(_ name: String, _ expected: Expected, _ setup: @escaping @Sendable (inout Scenario) -> Void) {
        self.name = name
        self.expected = expected
        self.setup = setup
    }

    var testDescription: String { "\(name) → \(expected)" }
}
