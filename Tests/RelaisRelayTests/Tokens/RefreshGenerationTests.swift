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

/// Refresh tokens derived from the session's secret (`SessionTokens`): generations, replays of any
/// age, forgeries that name a live session, one store record per session, and sessions opened by
/// an earlier version (random refresh tokens with a record each).
@Suite struct RefreshGenerationTests {
    typealias Route = RelayRouteTests
    typealias Sessions = RelayUserSessionTests

    static func refresh(_ client: any TestClientProtocol, _ token: String) async throws -> (status: HTTPResponse.Status, body: [String: JSONValue]) {
        let response = try await RelayDPoPTests.refresh(client, token, proof: nil)
        return (response.status, Route.json(response))
    }

    static func userinfo(_ client: any TestClientProtocol, _ access: String) async throws -> HTTPResponse.Status {
        try await client.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer " + access]).status
    }

    @Test(.tags(.fast)) func eachRotationIsTheNextGenerationAndOnlyTheLatestRotates() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let signed = try await Sessions.signIn(fixture, client)
            #expect(SessionTokens.parseRefresh(signed.refresh)?.generation == 0 && SessionTokens.parseRefresh(signed.refresh)?.sid == signed.sid)
            var token = signed.refresh
            for generation in 1...5 {
                fixture.clock.advance(by: .seconds(60))
                let next = try await Self.refresh(client, token)
                #expect(next.status == .ok)
                token = try #require(next.body["refresh_token"]?.stringValue)
                #expect(SessionTokens.parseRefresh(token)?.generation == generation)
            }
            let session = try #require(try await fixture.sessions.session(signed.sid))
            #expect(session.span.generation == 5 && session.span.refreshedAt == fixture.clock.now)
        }
    }

    /// The previous generation is answered within the grace window; an older one ends the session
    /// even inside that window (it was rotated twice since: someone else holds it).
    @Test(.tags(.fast)) func aTokenTwoGenerationsOldEndsTheSessionEvenWithinTheGraceWindow() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let signed = try await Sessions.signIn(fixture, client)
            let first = try #require(try await Self.refresh(client, signed.refresh).body["refresh_token"]?.stringValue)
            let second = try await Self.refresh(client, first)
            #expect(second.status == .ok)
            let replay = try await Self.refresh(client, signed.refresh)
            #expect(replay.status == .badRequest && replay.body["error_description"]?.stringValue == "the refresh token was already used; the session is revoked")
            #expect(try await fixture.sessions.session(signed.sid) == nil)
            #expect(try await Self.refresh(client, try #require(second.body["refresh_token"]?.stringValue)).status == .badRequest)
            #expect(fixture.events.named(.refreshReused).count == 1)
        }
    }

    /// However many rotations ago: nothing is kept per rotation, yet the token is recognised.
    @Test func aTokenFromLongAgoIsStillRecognisedAsAReplay() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let signed = try await Sessions.signIn(fixture, client)
            var token = signed.refresh
            for _ in 0..<40 {
                fixture.clock.advance(by: .seconds(300))
                token = try #require(try await Self.refresh(client, token).body["refresh_token"]?.stringValue)
            }
            #expect(try fixture.store.liveKeys().filter { $0.contains(signed.sid) } == ["session:{\(signed.sid)}"])
            #expect(try await Self.refresh(client, signed.refresh).body["error_description"]?.stringValue == "the refresh token was already used; the session is revoked")
            #expect(try await fixture.sessions.session(signed.sid) == nil)
        }
    }

    /// A made-up token naming a live session (its id is in every access token) is unknown: it
    /// must not end the session, whatever generation it claims.
    @Test(.tags(.fast), arguments: ["0.AAAAAAAAAAAAAAAAAAAAAAAAAAA", "1.AAAAAAAAAAAAAAAAAAAAAAAAAAA", "7.x", "00.x", "999999999.x", "1234567890.x", "-1.x", "1..x", "0"])
    func aForgedTokenNamingALiveSessionLeavesItAlone(_ tail: String) async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let signed = try await Sessions.signIn(fixture, client)
            let first = try #require(try await Self.refresh(client, signed.refresh).body["refresh_token"]?.stringValue)
            let forged = try await Self.refresh(client, signed.sid + "." + tail)
            #expect(forged.status == .badRequest && forged.body["error"]?.stringValue == "invalid_grant")
            #expect(forged.body["error_description"]?.stringValue == "the refresh token is unknown, or its session has ended")
            #expect(fixture.events.named(.refreshReused).isEmpty)
            #expect(try await Self.refresh(client, first).status == .ok)
        }
    }

    /// Another app's session: its token is refused without ending the session.
    @Test(.tags(.fast)) func anotherAppsRefreshTokenIsRefused() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let signed = try await Sessions.signIn(fixture, client)
            let response = try await client.execute(
                uri: "/token", method: .post, headers: Route.formHeaders,
                body: Route.form([("grant_type", "refresh_token"), ("client_id", "other"), ("refresh_token", signed.refresh)])
            )
            #expect(response.status != .ok)
            #expect(try await Self.refresh(client, signed.refresh).status == .ok)
        }
    }

    /// RFC 7009: any generation the session issued names it; a forgery names nothing.
    @Test(.tags(.fast)) func revokingAnOldGenerationEndsTheSessionAndAForgeryDoesNothing() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let signed = try await Sessions.signIn(fixture, client)
            let first = try #require(try await Self.refresh(client, signed.refresh).body["refresh_token"]?.stringValue)
            let forged = Route.form([("client_id", "app"), ("token", signed.sid + ".0.AAAAAAAAAAAAAAAAAAAAAAAAAAA")])
            #expect(try await client.execute(uri: "/revoke", method: .post, headers: Route.formHeaders, body: forged).status == .ok)
            #expect(try await fixture.sessions.session(signed.sid) != nil)
            let old = Route.form([("client_id", "app"), ("token", signed.refresh)])
            #expect(try await client.execute(uri: "/revoke", method: .post, headers: Route.formHeaders, body: old).status == .ok)
            #expect(try await fixture.sessions.session(signed.sid) == nil)
            #expect(try await Self.refresh(client, first).status == .badRequest)
        }
    }

    /// A rotation that keeps losing its compare-and-set (every read is overtaken) gives up with a
    /// 503 after its attempts, and leaves the session and its live token as they were.
    @Test(.tags(.fast)) func aRotationThatKeepsLosingItsSwapAnswers503AndChangesNothing() async throws {
        let fixture = Route.Fixture(serving: { InterposedStore(base: $0, losesEverySwap: true) })
        try await fixture.test { client in
            let signed = try await Sessions.signIn(fixture, client)
            let refused = try await Self.refresh(client, signed.refresh)
            #expect(refused.status == .serviceUnavailable && refused.body["error"]?.stringValue == "temporarily_unavailable")
            let session = try #require(try await fixture.sessions.session(signed.sid))
            #expect(session.span.generation == 0 && session.span.refreshedAt == nil)
            #expect(fixture.events.named(.refreshReused).isEmpty)
        }
    }

    // MARK: - Sessions opened by an earlier version

    /// What an earlier version left: a session whose sealed identity is JSON without a token
    /// secret, and a random refresh token with its own record.
    static func legacySession(_ fixture: Route.Fixture, rotated: RefreshRecord? = nil) async throws -> (sid: String, token: String) {
        let keys = try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions)
        let plaintext = Array(#"{"claims":{"given_name":"Angela"},"provider_id_token":"x","amr":["fc"]}"#.utf8)
        let sealed = try JWE.encrypt(plaintext, to: keys.ring.activeSessionKey, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
        let sid = RelayStore.newSessionID()
        let now = fixture.clock.now
        let session = SessionRecord(
            clientID: "app", subject: "sub-1", providerID: "fc", scopes: ["openid", "profile"], acr: "eidas1", createdAt: now, expiresAt: now + 86400,
            sealedIdentity: sealed
        )
        let token = RelayStore.newToken(for: sid)
        try await fixture.store.set(RelayStore.Key.session(sid), session.stored, ttl: .seconds(3600))
        let record = rotated ?? RefreshRecord(sid: sid, clientID: "app", jkt: nil)
        try await fixture.store.set(
            RelayStore.Key.refreshToken(token),
            StoredJSON.encode(
                RefreshRecord(
                    sid: sid, clientID: record.clientID, rotatedAt: record.rotatedAt, sealedSuccessor: record.sealedSuccessor, jkt: record.jkt
                )), ttl: .seconds(3600))
        return (sid, token)
    }

    @Test(.tags(.fast)) func anEarlierVersionsSessionMovesToDerivedTokensAndItsOldTokenIsAReplayAfterTheWindow() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let (sid, legacy) = try await Self.legacySession(fixture)
            let moved = try await Self.refresh(client, legacy)
            #expect(moved.status == .ok, "\(moved.body)")
            let derived = try #require(moved.body["refresh_token"]?.stringValue)
            #expect(SessionTokens.parseRefresh(derived)?.generation == 1)
            let access = try #require(moved.body["access_token"]?.stringValue)
            #expect(try await Self.userinfo(client, access) == .ok)
            let session = try #require(try await fixture.sessions.session(sid))
            let identity = try #require(
                SessionVault(keys: try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions)).open(SessionIdentity.self, session.sealedIdentity))
            #expect(identity.tokenSecret?.count == SessionTokens.secretBytes && identity.claims["given_name"]?.stringValue == "Angela" && identity.amr == ["fc"])
            // Within the window the old token gets the live one; the derived ones rotate on.
            #expect(try await Self.refresh(client, legacy).body["refresh_token"]?.stringValue == derived)
            let next = try await Self.refresh(client, derived)
            #expect(next.status == .ok && SessionTokens.parseRefresh(next.body["refresh_token"]?.stringValue ?? "")?.generation == 2)
            fixture.clock.advance(by: .seconds(31))
            #expect(try await Self.refresh(client, legacy).body["error_description"]?.stringValue == "the refresh token was already used; the session is revoked")
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// An earlier version's token whose session has ended: refused, nothing else happens.
    @Test(.tags(.fast)) func anEarlierVersionsTokenWhoseSessionEndedIsRefused() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let (sid, legacy) = try await Self.legacySession(fixture)
            _ = try await fixture.store.delete(RelayStore.Key.session(sid))
            let refused = try await Self.refresh(client, legacy)
            #expect(refused.status == .badRequest && refused.body["error_description"]?.stringValue == "the session has ended")
        }
    }

    /// A token marked rotated, within the window, whose session has no secret and no sealed answer
    /// (a state no version writes): nothing to answer with, so it is treated as a replay.
    @Test(.tags(.fast)) func aRotatedTokenWithNothingToAnswerWithEndsTheSession() async throws {
        let fixture = Route.Fixture()
        let rotated = RefreshRecord(sid: "", clientID: "app", rotatedAt: fixture.clock.now, sealedSuccessor: nil, jkt: nil)
        try await fixture.test { client in
            let (sid, legacy) = try await Self.legacySession(fixture, rotated: rotated)
            #expect(try await Self.refresh(client, legacy).body["error_description"]?.stringValue == "the refresh token was already used; the session is revoked")
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// Rotated by an earlier version, which sealed its answer in the record: a retry within the
    /// window gets that answer.
    @Test(.tags(.fast)) func aTokenRotatedByAnEarlierVersionGetsItsSealedAnswerWithinTheWindow() async throws {
        let fixture = Route.Fixture()
        let keys = try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions)
        let answer: JSONValue = .object(["refresh_token": .string("earlier-successor"), "token_type": .string("Bearer")])
        let sealed = try JWE.encrypt(answer.serialized(), to: keys.ring.activeSessionKey, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
        let rotated = RefreshRecord(sid: "", clientID: "app", rotatedAt: fixture.clock.now, sealedSuccessor: sealed, jkt: nil)
        try await fixture.test { client in
            let (sid, legacy) = try await Self.legacySession(fixture, rotated: rotated)
            #expect(try await Self.refresh(client, legacy).body == answer.objectValue)
            fixture.clock.advance(by: .seconds(31))
            #expect(try await Self.refresh(client, legacy).status == .badRequest)
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// A code minted by an earlier version (random, its identity without a secret) still opens its
    /// session, which gets a secret then.
    @Test(.tags(.fast)) func anEarlierVersionsCodeStillOpensItsSession() async throws {
        let fixture = Route.Fixture()
        let keys = try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions)
        let sealed = try JWE.encrypt(Array(#"{"claims":{},"provider_id_token":"x"}"#.utf8), to: keys.ring.activeSessionKey, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
        let verifier = SecureRandom.token(bits: 256)
        let app = AppRequest(
            clientID: "app", redirectURI: Route.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: nil,
            providerID: "fc", acr: "eidas1", forceLogin: false
        )
        let code = RelayStore.newToken(for: RelayStore.newSessionID())
        try await Route.saveStoredCode(fixture, RelayCode(app: app, subject: "sub-1", acr: "eidas1", sealedIdentity: sealed, providerSessionID: nil), code: code)
        try await fixture.test { client in
            let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", Route.redirect), ("code_verifier", verifier)]
            let signed = try Sessions.Signed(try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(fields)))
            #expect(SessionTokens.parseRefresh(signed.refresh)?.generation == 0)
            #expect(try await Self.refresh(client, signed.refresh).status == .ok)
        }
    }
}
