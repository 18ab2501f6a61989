import Foundation
import RelaisClock
import RelaisHTTPClient
import RelaisJOSE
import Testing

@testable import RelaisKit

/// Every flow of issue 32 against the real relay and development provider, for a plain app
/// (bearer tokens) and for an app with `dpop: required`, `dpop_nonce: true` and `attestation: required`.
@Suite struct RelaisKitFlowTests {
    @Test(arguments: ["plain", "secure"])
    func signInCallsAndSignOut(app: String) async throws {
        let harness = try await KitHarness.launch()
        let transport = CountingTransport()
        let storage = MemoryStorage()
        let client = harness.client(app, storage: storage, transport: transport)
        let states = client.states()
        let summary = try await client.signIn()
        #expect(await client.state == .signedIn(summary))
        #expect(summary.acr == "eidas1")
        if app == "secure" {
            // Bound to the instance key, attested by the development attester.
            let key = try #require(await client.instanceKeyDescription())
            #expect(summary.dpopThumbprint == key.thumbprint && key.kind == .software)
            #expect(summary.attested == "dev")
            let token = try #require(transport.requests.first { $0.url.path == "/token" })
            #expect(token.headers.contains { $0.name == "DPoP" } && token.headers.contains { $0.name == "OAuth-Client-Attestation-PoP" })
            // dpop_nonce: the first /token attempt was told the nonce and retried once.
            #expect(transport.errors.prefix(1) == ["use_dpop_nonce"])
            let authorize = try #require(transport.requests.first { $0.url.path.hasPrefix("/attest/dev") })
            #expect(String(decoding: authorize.body ?? Data(), as: UTF8.self).contains("jwk="))
        } else {
            #expect(summary.dpopThumbprint == nil && summary.attested == nil)
        }

        // The identity, through the one authorized entry point.
        let claims = try #require(JSONValue.object(from: Array(try await client.userinfo())))
        #expect(claims["given_name"] != nil && claims["sub"] != nil)
        let userinfo = try #require(transport.requests.last { $0.url.path == "/userinfo" })
        let authorization = try #require(userinfo.headers.first { $0.name == "Authorization" }?.value)
        #expect(authorization.hasPrefix(app == "secure" ? "DPoP " : "Bearer "))

        // A refresh rotates the refresh token and is stored before it returns.
        let before = try #require(try storage.decode(TokenRecord.self, "\(app).session"))
        let refreshed = try await client.refresh()
        let after = try #require(try storage.decode(TokenRecord.self, "\(app).session"))
        #expect(after.refreshToken != before.refreshToken && after.accessToken != before.accessToken)
        #expect(refreshed.sessionID == summary.sessionID)

        // A web page opened signed in: the session URL sets Relais' cookie and redirects.
        let link = try await client.webSession()
        let opened = try await harness.http.send(HTTPClientRequest(url: link.url.absoluteString))
        #expect(opened.status == 303)
        #expect(opened.header("set-cookie")?.hasPrefix("relais-session=") == true)  // plain http: not Secure, not __Host-

        // The person's sessions: this one is listed as current.
        let sessions = try await client.sessions()
        #expect(sessions.contains { $0.current && $0.id == summary.sessionID && $0.clientID == app && $0.device == "test device" })

        // Sign-out ends the session at Relais: the old refresh token no longer works.
        #expect(try await client.signOut())
        #expect(await client.state == .signedOut)
        #expect(try storage.read("\(app).session") == nil)
        let replay = try await harness.http.send(
            .form(
                url: harness.issuer + "/token",
                fields: [
                    ("grant_type", "refresh_token"), ("refresh_token", after.refreshToken ?? ""), ("client_id", app),
                ]))
        #expect(replay.status == 400 || replay.status == 401)

        // The states seen, in order.
        var seen: [String] = []
        for await state in states {
            seen.append(state.code)
            if state == .signedOut, seen.count > 1 { break }
        }
        #expect(Array(seen.prefix(4)) == ["signed_out", "authorizing", "exchanging_code", "signed_in"])
        #expect(seen.contains("refreshing") && seen.suffix(2) == ["signing_out", "signed_out"])
    }

    @Test(arguments: ["plain", "secure"])
    func fiftyConcurrentCallsOnAnExpiredTokenRefreshOnce(app: String) async throws {
        let harness = try await KitHarness.launch()
        let transport = CountingTransport()
        let storage = MemoryStorage()
        let client = harness.client(app, storage: storage, transport: transport)
        let signedIn = try await client.signIn()
        harness.clock.advance(by: .seconds(6 * 60))  // past the 5-minute access token
        let userinfo = try #require(URL(string: harness.issuer + "/userinfo"))
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { try await client.authorizedRequest(HTTPRequest(url: userinfo)).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 50))
        #expect(transport.refreshes == 1)
        let now = try #require(await client.state.session)
        #expect(now.sessionID == signedIn.sessionID && now.accessTokenExpiresAt > signedIn.accessTokenExpiresAt)
        // The refreshed tokens are the stored ones.
        #expect(try storage.decode(TokenRecord.self, "\(app).session")?.summary == now)
    }

    @Test func aNonceRotatedMidSessionIsRetriedOnce() async throws {
        let harness = try await KitHarness.launch()
        let transport = CountingTransport()
        let client = harness.client("secure", transport: transport)
        try await client.signIn()
        let nonceAnswers = transport.errors.filter { $0 == "use_dpop_nonce" }.count
        // Three minutes on, the nonce the client holds is two windows old: Relais refuses it.
        harness.clock.advance(by: .seconds(180))
        try await client.refresh()
        #expect(transport.errors.filter { $0 == "use_dpop_nonce" }.count == nonceAnswers + 1)
        #expect(transport.refreshes == 1)
        #expect(try await client.userinfo().isEmpty == false)
    }

    @Test func aProofKeyThatNoLongerMatchesEndsInKeyLost() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let client = harness.client("secure", storage: storage)
        try await client.signIn()
        // A restored backup brings another instance key (the vector's format of a stored key).
        let other = SoftwareProofKey()
        try storage.write("secure.instance-key", Data(#"{"kind":"software","representation":"\#(other.persistentRepresentation.base64EncodedString())"}"#.utf8))
        let restarted = harness.client("secure", storage: storage)
        await #expect(throws: RelaisKitError.self) { try await restarted.userinfo() }
        guard case .failed(let error) = await restarted.state else { Issue.record("state \(await restarted.state)"); return }
        #expect(error.code == .keyLost)
        #expect(try storage.read("secure.session") == nil)
    }

    @Test func lockedStorageThenUnlockedKeepsTheSession() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let first = try await harness.client("secure", storage: storage).signIn()
        storage.isLocked = true  // a cold start before the first unlock
        let client = harness.client("secure", storage: storage)
        do {
            _ = try await client.userinfo()
            Issue.record("a locked storage read as a session")
        } catch let error as RelaisKitError {
            #expect(error.code == .storageLocked)
        }
        #expect(await client.state == .storageLocked)
        storage.isLocked = false
        #expect(try await client.userinfo().isEmpty == false)
        #expect(await client.state.session?.sessionID == first.sessionID)
    }

    @Test func cancelledAtTheProvider() async throws {
        let harness = try await KitHarness.launch()
        let client = harness.client("plain", identity: nil)
        do {
            try await client.signIn()
            Issue.record("a cancelled sign-in succeeded")
        } catch let error as RelaisKitError {
            #expect(error.code == .cancelled)
        }
        #expect(await client.state.code == "failed:cancelled")
    }

    @Test func aSessionEndedFromAnotherDevice() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let phone = harness.client("secure", storage: storage)
        let mine = try await phone.signIn()
        let tablet = try await harness.otherDevice()
        let listed = try await tablet.sessions()
        #expect(listed.contains { $0.id == mine.sessionID && !$0.current && $0.attested == "dev" })
        try await tablet.endSession(id: try #require(mine.sessionID))
        do {
            _ = try await phone.userinfo()
            Issue.record("an ended session still answered")
        } catch let error as RelaisKitError {
            #expect(error.code == .sessionEnded)
        }
        #expect(await phone.state.code == "failed:session_ended")
        #expect(try storage.read("secure.session") == nil)
        #expect(try await tablet.userinfo().isEmpty == false)  // the other session lives on
    }

    @Test func aReplayedRefreshTokenEndsInRefreshTokenReused() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let client = harness.client("plain", storage: storage)
        try await client.signIn()
        let copy = try #require(try storage.read("plain.session"))  // a backup of the app's data
        try await client.refresh()
        harness.clock.advance(by: .seconds(45))  // past Relais' 30 s refresh grace
        let restored = MemoryStorage()
        try restored.write("plain.session", copy)
        let fromBackup = harness.client("plain", storage: restored)
        do {
            try await fromBackup.refresh()
            Issue.record("a replayed refresh token was accepted")
        } catch let error as RelaisKitError {
            #expect(error.code == .refreshTokenReused)
        }
        #expect(await fromBackup.state.code == "failed:refresh_token_reused")
    }

    @Test func anotherProcessRefreshedFirst() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let first = harness.client("plain", storage: storage)
        try await first.signIn()
        let second = harness.client("plain", storage: storage)
        _ = try await second.status()  // the second process read the tokens
        try await first.refresh()
        harness.clock.advance(by: .seconds(45))
        // Its token in memory is the old one, which Relais would take for a replay: it refreshes with
        // the one in the store instead, and both processes keep the session.
        try await second.refresh()
        #expect(await second.state.session != nil)
        #expect(try await first.userinfo().isEmpty == false)
        #expect(try await second.userinfo().isEmpty == false)
    }
}
