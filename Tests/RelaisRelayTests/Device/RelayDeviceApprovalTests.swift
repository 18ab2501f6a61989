import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisRelay

/// Finding 1 of the review: approving a device opens a session that outlives the approving token,
/// so a stolen access token must not be enough. By default the token is DPoP-bound and proved, its
/// sign-in recent, and the device's session lives and dies with the approving session.
@Suite(.tags(.fast)) struct RelayDeviceApprovalTests {
    typealias Device = RelayDeviceTests
    typealias Route = RelayRouteTests
    typealias DPoP = RelayDPoPTests

    /// The approving app's access tokens live an hour here, so that the sign-in's age, not the
    /// token's, is what a test moves past.
    static func fixture(
        _ change: @escaping (inout RelaisConfiguration) -> Void = { _ in }, serving wrap: (EmbeddedStore) -> any KeyValueStore = { $0 }
    ) -> Route.Fixture {
        Device.fixture(
            { configuration in
                configuration.apps[0].accessTokenLifetime = .seconds(3600)
                change(&configuration)
            }, serving: wrap)
    }

    /// A device request approved by `phone`, and the device's tokens.
    static func approvedDevice(_ fixture: Route.Fixture, _ client: any TestClientProtocol, by phone: Device.Phone) async throws -> [String: JSONValue] {
        let started = try await Device.start(client)
        let approved = try await Device.approve(client, phone, started.userCode)
        #expect(approved.status == .ok, "\(String(buffer: approved.body))")
        fixture.clock.advance(by: .seconds(5))
        let tokens = try await Device.poll(client, started.deviceCode)
        #expect(tokens.status == .ok, "\(String(buffer: tokens.body))")
        return Route.json(tokens)
    }

    /// The session id an answer's access token names.
    static func sid(_ tokens: [String: JSONValue]) throws -> String {
        let access = try #require(tokens["access_token"]?.stringValue)
        return try #require(try DPoP.claims(access)["sid"]?.stringValue)
    }

    /// `Authorization: DPoP` with the phone's token and a proof for `method` and `path`.
    static func bound(_ phone: Device.Phone, _ method: String, _ path: String) throws -> HTTPFields {
        var headers: HTTPFields = [.authorization: "DPoP " + phone.access]
        headers[DPoPGuard.header] = try #require(phone.key).proof(method, Route.issuer + path, accessToken: phone.access)
        return headers
    }

    static func refreshDevice(_ client: any TestClientProtocol, _ token: String) async throws -> TestResponse {
        try await client.execute(
            uri: "/token", method: .post, headers: Route.formHeaders,
            body: Route.form([("grant_type", "refresh_token"), ("client_id", "tv"), ("refresh_token", token)])
        )
    }

    @Test func aBearerTokenCannotApproveUnlessTheConfigurationSaysSo() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let started = try await Device.start(client)
            let unbound = try await Device.phone(fixture, client, bound: false)
            let refused = try await Device.approve(client, unbound, started.userCode)
            #expect(refused.status == .unauthorized)
            #expect(Device.error(refused) == "invalid_token")
            // RFC 9449 §7.1: the challenge names the scheme that would work.
            #expect(refused.headers[.wwwAuthenticate]?.hasPrefix("DPoP ") == true, "\(refused.headers)")
            #expect(Route.json(refused)["error_description"]?.stringValue?.contains("device_approvers_proof") == true)
            #expect(Device.error(try await Device.poll(client, started.deviceCode)) == "authorization_pending")
            // The same person's bound token approves.
            #expect(try await Device.approve(client, try await Device.phone(fixture, client), started.userCode).status == .ok)
        }
        let relaxed = Self.fixture { $0.apps[1].deviceGrant?.approverProof = .bearer }
        try await relaxed.test { client in
            let started = try await Device.start(client)
            #expect(try await Device.approve(client, try await Device.phone(relaxed, client, bound: false), started.userCode).status == .ok)
        }
    }

    @Test func anOldSignInIsAskedToSignInAgain() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let phone = try await Device.phone(fixture, client)
            fixture.clock.advance(by: .seconds(901))
            let started = try await Device.start(client)
            let refused = try await Device.approve(client, phone, started.userCode)
            #expect(refused.status == .unauthorized)
            #expect(Device.error(refused) == "insufficient_user_authentication")
            // RFC 9470: the challenge says what the next sign-in needs, in the token's scheme.
            let challenge = try #require(refused.headers[.wwwAuthenticate])
            #expect(challenge.hasPrefix("DPoP ") && challenge.contains("max_age=900"), "\(challenge)")
            // A new sign-in may.
            #expect(try await Device.approve(client, try await Device.phone(fixture, client), started.userCode).status == .ok)
        }
        let longer = Self.fixture { $0.apps[1].deviceGrant?.approvalMaxAge = .seconds(1800) }
        try await longer.test { client in
            let phone = try await Device.phone(longer, client)
            longer.clock.advance(by: .seconds(901))
            let started = try await Device.start(client)
            #expect(try await Device.approve(client, phone, started.userCode).status == .ok)
        }
    }

    /// A device session opened by an approval is as recent as the approval, not as a sign-in:
    /// were its app among the approvers, it could approve the next device, and that one the
    /// next, without anybody signing in again. Only a sign-in on the device approves.
    @Test func aSessionOpenedByAnApprovalApprovesNothing() async throws {
        let fixture = Self.fixture {
            $0.apps[1].deviceGrant?.approvers = ["app", "tv"]
            $0.apps[1].deviceGrant?.approverProof = .bearer
        }
        try await fixture.test { client in
            let phone = try await Device.phone(fixture, client)
            let tv = try await Self.approvedDevice(fixture, client, by: phone)
            let asApprover = Device.Phone(access: try #require(tv["access_token"]?.stringValue), key: nil)
            let next = try await Device.start(client)
            let refused = try await Device.approve(client, asApprover, next.userCode)
            #expect(refused.status == .unauthorized && Device.error(refused) == "insufficient_user_authentication", "\(String(buffer: refused.body))")
            fixture.clock.advance(by: .seconds(5))
            #expect(Device.error(try await Device.poll(client, next.deviceCode)) == "authorization_pending")
            // The phone, signed in a moment ago, still may.
            #expect(try await Device.approve(client, phone, next.userCode).status == .ok)
        }
    }

    /// Logout, revocation, `/sessions`, a replayed refresh token: whichever way the approving
    /// session ends, the device's ends with it.
    @Test func theDevicesSessionEndsWithTheApprovingSession() async throws {
        enum Ending: CaseIterable { case logout, revocation, endedFromSessions, refreshReplay }
        for ending in Ending.allCases {
            let fixture = Self.fixture()
            try await fixture.test { client in
                let phone = try await Device.phone(fixture, client)
                let key = try #require(phone.key)
                let device = try await Self.approvedDevice(fixture, client, by: phone)
                let deviceSID = try Self.sid(device)
                let deviceSession = try #require(try await fixture.sessions.session(deviceSID))
                let approving = try #require(try await fixture.sessions.session(phone.sid))
                #expect(deviceSession.origin.approvedBy == phone.sid)
                #expect(deviceSession.span.expiresAt <= approving.span.expiresAt, "the device's session outlives its approver")

                switch ending {
                case .logout:
                    #expect(try await client.execute(uri: "/logout", method: .post, headers: try Self.bound(phone, "POST", "/logout")).status == .noContent)
                case .revocation:
                    var headers = Route.formHeaders
                    headers[DPoPGuard.header] = try key.proof("POST", Route.issuer + "/revoke")
                    let revoked = try await client.execute(
                        uri: "/revoke", method: .post, headers: headers, body: Route.form([("client_id", "app"), ("token", try #require(phone.refresh))])
                    )
                    #expect(revoked.status == .ok)
                case .endedFromSessions:
                    let path = "/sessions/" + phone.sid
                    #expect(try await client.execute(uri: path, method: .delete, headers: try Self.bound(phone, "DELETE", path)).status == .noContent)
                case .refreshReplay:
                    let old = try #require(phone.refresh)
                    #expect(try await DPoP.refresh(client, old, proof: try key.proof("POST", DPoP.tokenURL)).status == .ok)
                    fixture.clock.advance(by: .seconds(120))
                    let replayed = try await DPoP.refresh(client, old, proof: try key.proof("POST", DPoP.tokenURL))
                    #expect(Device.error(replayed) == "invalid_grant" && Route.json(replayed)["error_reason"] == .string("refresh_token_reused"))
                }
                #expect(try await fixture.sessions.session(phone.sid) == nil, "\(ending): the approving session is still there")
                #expect(try await fixture.sessions.session(deviceSID) == nil, "\(ending): the device's session outlived its approver")
                let refreshed = try await Self.refreshDevice(client, try #require(device["refresh_token"]?.stringValue))
                #expect(Device.error(refreshed) == "invalid_grant", "\(ending)")
                // The session is gone (ended with its approver): a client reads it from error_reason.
                #expect(Route.json(refreshed)["error_reason"] == .string("session_ended"), "\(ending)")
            }
        }
    }

    /// Ending the device's session along with its approver is clean-up after the approver's end;
    /// when it did not happen (here: the approver's record deleted behind Relais' back), the
    /// device's refresh still fails closed and ends it.
    @Test func aDeviceWhoseApproverIsGoneCannotRefresh() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (_, device, deviceSID) = try await Self.deviceOfAVanishedApprover(fixture, client)
            #expect(try await fixture.sessions.session(deviceSID) != nil)
            let refreshed = try await Self.refreshDevice(client, try #require(device["refresh_token"]?.stringValue))
            #expect(Device.error(refreshed) == "invalid_grant")
            #expect(Route.json(refreshed)["error_description"]?.stringValue?.contains("approved this device") == true)
            #expect(Route.json(refreshed)["error_reason"] == .string("approver_ended"))
            #expect(try await fixture.sessions.session(deviceSID) == nil)
        }
    }

    /// A device approved by `phone`, whose approving session's record the store then dropped, as
    /// its idle timeout would (no deletion by Relais, no clean-up).
    static func deviceOfAVanishedApprover(
        _ fixture: Route.Fixture, _ client: any TestClientProtocol
    ) async throws -> (phone: Device.Phone, device: [String: JSONValue], deviceSID: String) {
        let phone = try await Device.phone(fixture, client)
        let device = try await Self.approvedDevice(fixture, client, by: phone)
        _ = try await fixture.store.delete(RelayStore.Key.session(phone.sid))
        return (phone, device, try Self.sid(device))
    }

    /// A step-up replaces the approving session by a new one for the same person (its code names
    /// the session it replaces): the devices the old one approved stay signed in, now under the
    /// new session, and end with it.
    @Test func aStepUpKeepsTheApprovedDevicesUnderTheNewSession() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let phone = try await Device.phone(fixture, client)
            let device = try await Self.approvedDevice(fixture, client, by: phone)
            let deviceSID = try Self.sid(device)
            let stepped = try await Self.stepUp(fixture, client, phone)
            #expect(try await fixture.sessions.session(phone.sid) == nil, "the stepped-up session is still there")
            #expect(try await fixture.sessions.session(deviceSID)?.origin.approvedBy == stepped)
            let refreshed = try await Self.refreshDevice(client, try #require(device["refresh_token"]?.stringValue))
            #expect(refreshed.status == .ok, "\(String(buffer: refreshed.body))")
            #expect(try await fixture.sessions.revoke(stepped, reason: .logout))
            #expect(try await fixture.sessions.session(deviceSID) == nil, "the device's session outlived its new approver")
        }
    }

    /// An approver that expired (idle) before its step-up's code was redeemed took its devices
    /// with it: the step-up does not bring them back.
    @Test func aStepUpOfAnExpiredApproverRevivesNoDevice() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (phone, device, deviceSID) = try await Self.deviceOfAVanishedApprover(fixture, client)
            let stepped = try await Self.stepUp(fixture, client, phone)
            #expect(try await fixture.sessions.session(deviceSID)?.origin.approvedBy != stepped, "the device was moved to the new session")
            let refreshed = try await Self.refreshDevice(client, try #require(device["refresh_token"]?.stringValue))
            #expect(Device.error(refreshed) == "invalid_grant", "\(String(buffer: refreshed.body))")
        }
    }

    /// The device refreshes while its approver steps up, paused after each of its store calls in
    /// turn: a refresh that read the device's record before the move, and its approver after its
    /// end, reads again rather than ending a session that was moved.
    @Test func aDeviceRefreshingDuringItsApproversStepUpStaysSignedIn() async throws {
        var pausePoint = 1
        while true {
            let gate = InterposedStore.Gate()
            let fixture = Self.fixture(serving: { InterposedStore(base: $0, pauseFirstAfter: pausePoint, gate: gate) })
            let point = pausePoint
            try await fixture.test { client in
                let phone = try await Device.phone(fixture, client)
                let device = try await Self.approvedDevice(fixture, client, by: phone)
                let deviceSID = try Self.sid(device)
                let refresh = try #require(device["refresh_token"]?.stringValue)
                async let refreshed = InterposedStore.$caller.withValue(.first) {
                    let response = try await Self.refreshDevice(client, refresh)
                    gate.finished()
                    return response
                }
                _ = await gate.waitUntilPausedOrDone()
                let stepped = try await InterposedStore.$caller.withValue(.second) { try await Self.stepUp(fixture, client, phone) }
                gate.release()
                let answer = try await refreshed
                #expect(answer.status == .ok, "pause after store call \(point): \(String(buffer: answer.body))")
                #expect(try await fixture.sessions.session(deviceSID)?.origin.approvedBy == stepped, "pause after store call \(point)")
            }
            if gate.calls.withLock({ $0 }) < pausePoint { break }
            pausePoint += 1
        }
        #expect(pausePoint >= 3)
    }

    /// The phone's step-up: a code for the same person naming its session, redeemed; the new session's id.
    static func stepUp(_ fixture: Route.Fixture, _ client: any TestClientProtocol, _ phone: Device.Phone) async throws -> String {
        let verifier = SecureRandom.token(bits: 256)
        let app = AppRequest(
            clientID: "app", redirectURI: Route.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: nil,
            providerID: "fc", acr: "eidas2", forceLogin: false
        )
        let code = try await Route.mintCode(fixture, app: app, acr: "eidas2", replaces: phone.sid)
        let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", Route.redirect), ("code_verifier", verifier)]
        let redeemed = try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(fields))
        #expect(redeemed.status == .ok, "\(String(buffer: redeemed.body))")
        return try Self.sid(Route.json(redeemed))
    }

    /// An approval whose approving session ends before the device polls opens nothing.
    @Test func anApprovalWhoseApproverEndedBeforeThePollOpensNothing() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let phone = try await Device.phone(fixture, client)
            let started = try await Device.start(client)
            #expect(try await Device.approve(client, phone, started.userCode).status == .ok)
            #expect(try await fixture.sessions.revoke(phone.sid, reason: .logout))
            fixture.clock.advance(by: .seconds(5))
            let polled = try await Device.poll(client, started.deviceCode)
            #expect(Device.error(polled) == "access_denied", "\(String(buffer: polled.body))")
        }
    }

    /// `/sessions` says which session approved which.
    @Test func theSessionListShowsTheApprover() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let phone = try await Device.phone(fixture, client)
            let device = try await Self.approvedDevice(fixture, client, by: phone)
            let deviceSID = try Self.sid(device)
            let listed = Route.json(try await client.execute(uri: "/sessions", method: .get, headers: try Self.bound(phone, "GET", "/sessions")))["sessions"]?.arrayValue ?? []
            let entries = Dictionary(uniqueKeysWithValues: listed.compactMap { entry in entry.objectValue.flatMap { object in object["id"]?.stringValue.map { ($0, object) } } })
            #expect(entries[deviceSID]?["approved_by"] == .string(phone.sid))
            #expect(entries[phone.sid]?["approved_by"] == .null)
        }
    }
}
