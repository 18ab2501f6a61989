import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Codes that carry their sign-in sealed (``SealedCode``): nothing is stored until /token, and a
/// used-mark written with the session keeps each code good once.
@Suite(.tags(.fast)) struct SealedCodeTests {
    typealias Route = RelayRouteTests

    static func app(_ verifier: String) -> AppRequest {
        AppRequest(
            clientID: "app", redirectURI: Route.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid", "profile"], nonce: nil,
            providerID: "fc", acr: "eidas1", forceLogin: false
        )
    }

    static func redeem(_ client: any TestClientProtocol, _ code: String, _ verifier: String) async throws -> (HTTPResponse.Status, [String: JSONValue]) {
        let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", Route.redirect), ("code_verifier", verifier)]
        let response = try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(fields))
        var answer = Route.json(response)
        answer["request_id"] = nil
        return (response.status, answer)
    }

    /// A code as /callback mints it for the app, the session it names and its PKCE verifier.
    static func mint(_ fixture: Route.Fixture, verifier: String = PKCE.makeVerifier()) async throws -> (code: String, sid: String, verifier: String) {
        let sid = RelayStore.newSessionID()
        return (try await Route.mintCode(fixture, app: app(verifier), acr: "eidas1", sid: sid), sid, verifier)
    }

    static let unknown: [String: JSONValue] = ["error": .string("invalid_grant"), "error_description": .string("the code is unknown or expired")]
    static let replayed: [String: JSONValue] = [
        "error": .string("invalid_grant"), "error_description": .string("the code was already used; the session it opened is revoked"),
    ]

    @Test func aCodeShowsNothingOfThePersonAndIsMarkedUsedWithItsSession() async throws {
        let fixture = Route.Fixture()
        let verifier = PKCE.makeVerifier()
        let sid = RelayStore.newSessionID()
        let identity = SessionIdentity(claims: ["given_name": .string("Angela")], amr: nil, authTime: nil, providerIDToken: "provider-token-x")
        let code = try await Route.mintCode(fixture, app: Self.app(verifier), subject: "subject-7f3a", acr: "eidas1", identity: identity, sid: sid)
        #expect(SealedCode.hasSealedShape(code) && code.hasPrefix(sid + "."))
        let readable = code.split(separator: ".").compactMap { Base64URL.decode(String($0)) }.map { String(decoding: $0, as: UTF8.self) }.joined()
        for secret in ["Angela", "subject-7f3a", "provider-token-x", Route.redirect] {
            #expect(!code.contains(secret) && !readable.contains(secret), "\(secret) is readable in the code")
        }
        try await fixture.test { client in
            #expect(try await fixture.store.get(RelayStore.Key.usedCode(sid)) == nil)
            let (status, tokens) = try await Self.redeem(client, code, verifier)
            #expect(status == .ok, "\(tokens)")
            #expect(try await fixture.store.get(RelayStore.Key.usedCode(sid)) == [1])
            #expect(try await fixture.sessions.session(sid)?.subject == "subject-7f3a")
        }
    }

    /// An altered code, one moved to another session, one sealed with a key Relais does not have,
    /// and something else sealed with the session key: each refused, with nothing written.
    @Test func anAlteredOrForeignCodeIsRefusedAndWritesNothing() async throws {
        let fixture = Route.Fixture()
        let (code, sid, verifier) = try await Self.mint(fixture)
        var parts = code.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let other = RelayStore.newSessionID()
        var altered = parts
        altered[4] = String(altered[4].prefix(10)) + (altered[4].dropFirst(10).first == "A" ? "B" : "A") + altered[4].dropFirst(11)
        parts[0] = other
        let vault = SessionVault(keys: try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions))
        let identity = SessionIdentity(claims: [:], amr: nil, authTime: nil, providerIDToken: "x")
        let foreignKey = JWK(symmetric: Array(repeating: 3, count: 32), keyID: "elsewhere", algorithm: "dir")
        let payload: JSONValue = .object([
            "use": .string("authorization_code"), "sid": .string(sid), "exp": .number(fixture.sessions.clock.now + 60),
            "code": RelayCode(app: Self.app(verifier), subject: "sub-1", acr: nil, sealedIdentity: try vault.seal(identity), providerSessionID: nil).json,
        ])
        let cases = [
            ("altered ciphertext", altered.joined(separator: "."), sid),
            ("another session's prefix", parts.joined(separator: "."), other),
            ("sealed elsewhere", sid + "." + (try JWE.encrypt(payload.serialized(), to: foreignKey, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)), sid),
            ("a sealed identity", sid + "." + (try vault.seal(identity)), sid),
        ]
        try await fixture.test { client in
            for (name, presented, named) in cases {
                let (status, answer) = try await Self.redeem(client, presented, verifier)
                #expect(status == .badRequest && answer == Self.unknown, "\(name): \(answer)")
                #expect(try await fixture.store.get(RelayStore.Key.usedCode(named)) == nil, "\(name)")
                #expect(try await fixture.sessions.session(named) == nil, "\(name)")
            }
            // The genuine code is untouched by all of that.
            #expect(try await Self.redeem(client, code, verifier).0 == .ok)
        }
    }

    /// The mark is a key of its own: a code whose session has ended cannot open another.
    @Test func aUsedCodeCannotOpenASecondSessionAfterTheFirstEnds() async throws {
        let fixture = Route.Fixture()
        let (code, sid, verifier) = try await Self.mint(fixture)
        try await fixture.test { client in
            #expect(try await Self.redeem(client, code, verifier).0 == .ok)
            #expect(try await fixture.sessions.revoke(sid, reason: .logout))
            let (status, answer) = try await Self.redeem(client, code, verifier)
            #expect(status == .badRequest && answer == Self.unknown, "\(answer)")
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// Past its deadline a code opens nothing, but its replay still ends the session it opened.
    @Test func aReplayAfterTheDeadlineStillEndsTheSession() async throws {
        let fixture = Route.Fixture()
        let (code, sid, verifier) = try await Self.mint(fixture)
        try await fixture.test { client in
            #expect(try await Self.redeem(client, code, verifier).0 == .ok)
            fixture.clock.advance(by: .seconds(600))
            let (status, answer) = try await Self.redeem(client, code, verifier)
            #expect(status == .badRequest && answer == Self.replayed, "\(answer)")
            #expect(try await fixture.sessions.session(sid) == nil)
            #expect(fixture.events.names.contains("token.code_replayed"))
        }
    }

    /// A code that failed a check is burned: the right verifier after a wrong one opens nothing.
    /// A used code presented with a wrong verifier is a replay: the session it opened ends.
    @Test func aCodeThatFailedACheckIsBurnedAndAUsedOneIsAReplay() async throws {
        let fixture = Route.Fixture()
        let (code, burned, verifier) = try await Self.mint(fixture)
        let (second, used, _) = try await Self.mint(fixture, verifier: verifier)
        try await fixture.test { client in
            let (status, answer) = try await Self.redeem(client, code, PKCE.makeVerifier())
            #expect(status == .badRequest && answer["error_description"] == .string("code_verifier does not match the code_challenge"))
            let (after, again) = try await Self.redeem(client, code, verifier)
            #expect(after == .badRequest && again == Self.unknown, "\(again)")
            #expect(try await fixture.sessions.session(burned) == nil)

            #expect(try await Self.redeem(client, second, verifier).0 == .ok)
            let (replay, refusal) = try await Self.redeem(client, second, PKCE.makeVerifier())
            #expect(replay == .badRequest && refusal == Self.replayed, "\(refusal)")
            #expect(try await fixture.sessions.session(used) == nil)
        }
    }

    /// A mark gone early (a Redis failover, instances' clocks far apart) does not let a code open
    /// its session twice: the step refuses to write over the live session, and the replay ends it.
    @Test func aCodeWhoseMarkIsGoneStillCannotOverwriteItsSession() async throws {
        let fixture = Route.Fixture()
        let (code, sid, verifier) = try await Self.mint(fixture)
        try await fixture.test { client in
            #expect(try await Self.redeem(client, code, verifier).0 == .ok)
            let session = try await fixture.store.get(RelayStore.Key.session(sid))
            #expect(try await fixture.store.delete(RelayStore.Key.usedCode(sid)))
            let (status, answer) = try await Self.redeem(client, code, verifier)
            #expect(status == .badRequest && answer == Self.replayed, "\(answer)")
            #expect(session != nil)
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// During a rolling upgrade an older instance may still store a code: it opens its session
    /// once, and its replay ends it (Migration/BeforeSealedCodes.swift).
    @Test func aStoredCodeOfAnEarlierVersionOpensItsSessionOnce() async throws {
        let fixture = Route.Fixture()
        let verifier = PKCE.makeVerifier()
        let sid = RelayStore.newSessionID()
        let identity = SessionIdentity(claims: [:], amr: nil, authTime: nil, providerIDToken: "x")
        let vault = SessionVault(keys: try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions))
        let code = SessionTokens.storedCode(sid: sid, secret: try #require(identity.tokenSecret))
        #expect(!SealedCode.hasSealedShape(code))
        let record = RelayCode(app: Self.app(verifier), subject: "sub-1", acr: "eidas1", sealedIdentity: try vault.seal(identity), providerSessionID: nil)
        try await Route.saveStoredCode(fixture, record, code: code)
        let burned = SessionTokens.storedCode(sid: RelayStore.newSessionID(), secret: SessionTokens.newSecret())
        try await Route.saveStoredCode(fixture, record, code: burned)
        try await fixture.test { client in
            // Burned by a wrong verifier: the record goes, the right verifier then finds nothing.
            #expect(try await Self.redeem(client, burned, PKCE.makeVerifier()).0 == .badRequest)
            #expect(try await fixture.store.get(RelayStore.Key.code(burned)) == nil)
            #expect(try await Self.redeem(client, burned, verifier).1 == Self.unknown)

            #expect(try await Self.redeem(client, code, verifier).0 == .ok)
            #expect(try await fixture.store.get(RelayStore.Key.code(code)) == nil)
            #expect(try await fixture.sessions.session(sid) != nil)
            let (status, answer) = try await Self.redeem(client, code, verifier)
            #expect(status == .badRequest && answer == Self.replayed, "\(answer)")
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }
}
