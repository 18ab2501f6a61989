import RelaisClock
import RelaisConfig
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// `DeviceCodeGrant.decide` row by row (the poll as the store answered it, the approving session as
/// read, the time, to the action), the request's standing at the expiry edge, and the poll
/// interval's edge in the store itself.
@Suite(.tags(.fast)) struct DevicePollDecisionTests {
    static let sid = RelayStore.newSessionID()
    static let now = 5000.0
    static let lifetime = Duration.seconds(3600)
    static let request = RelayStore.DeviceRequest(clientID: "desk", scopes: ["openid"], device: "Kiosk", expiresAt: 5300)
    static let approved = RelayStore.DeviceDecision(
        approved: true, subject: "sub-1", providerID: "fc", acr: "eidas1", sealedIdentity: "sealed", providerSessionID: "provider-sid", via: "browser"
    )

    enum Action: Sendable, Equatable {
        /// The session's absolute end and the session that approved it.
        case open(expiresAt: Double, approvedBy: String?)
        case refuse(RelayError.Code, String)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var expected: Action
        var poll: RelayStore.DevicePoll
        var approver: SessionRecord?

        init(_ description: String, _ poll: RelayStore.DevicePoll, approver: SessionRecord? = nil, _ expected: Action) {
            testDescription = description
            self.poll = poll
            self.approver = approver
            self.expected = expected
        }
    }

    static func approver(expiresAt: Double) -> SessionRecord {
        SessionRecord(clientID: "app", subject: "sub-1", providerID: "fc", scopes: ["openid"], acr: nil, createdAt: 0, expiresAt: expiresAt, sealedIdentity: "s")
    }

    static func decided(_ edit: (inout RelayStore.DeviceDecision) -> Void = { _ in }) -> RelayStore.DevicePoll {
        var decision = approved
        edit(&decision)
        return .decided(sid: sid, request, decision)
    }

    static let byApp = decided { $0.approverSID = "a" }
    static let denied = Action.refuse(.accessDenied, "the request was denied")
    static let approverGone = Action.refuse(.accessDenied, "the app session that approved the request has ended since")

    static let rows: [Row] = [
        Row("never issued", .unknown, .refuse(.invalidGrant, "the device code is unknown")),
        Row("issued and expired", .expired, .refuse(.expiredToken, "the device code has expired")),
        Row("issued to another client", .foreign, .refuse(.invalidGrant, "the device code was issued to another client")),
        Row("used already", .used, .refuse(.invalidGrant, "the device code was already used")),
        Row("polled within the interval", .tooSoon, .refuse(.slowDown, "poll at most every 5 s")),
        Row("not decided yet", .pending, .refuse(.authorizationPending, "the request is waiting for approval")),
        Row("denied", .decided(sid: sid, request, .denied), denied),
        Row("approved without a sign-in", decided { $0.sealedIdentity = nil }, denied),
        Row("approved without a subject", decided { $0.subject = nil }, denied),
        Row("approved without a provider", decided { $0.providerID = nil }, denied),
        Row("approved at /device in a browser", decided(), .open(expiresAt: now + 3600, approvedBy: nil)),
        Row("approved by an app session that lives on", byApp, approver: approver(expiresAt: 1e9), .open(expiresAt: now + 3600, approvedBy: "a")),
        Row("approved by an app session ending first: capped at its end", byApp, approver: approver(expiresAt: 6000), .open(expiresAt: 6000, approvedBy: "a")),
        Row("approved by an app session ending with the lifetime", byApp, approver: approver(expiresAt: now + 3600), .open(expiresAt: now + 3600, approvedBy: "a")),
        Row("approved by an app session that has ended since", byApp, approverGone),
        Row("denied, whatever the approver", .decided(sid: sid, request, .denied), approver: approver(expiresAt: 1e9), denied),
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) {
        let requester = TokenRequester(clientID: "desk", proofKey: "k", attested: ClientAttested(platform: "macos", thumbprint: "i"))
        switch DeviceCodeGrant.decide(row.poll, approver: row.approver, requester, now: Self.now, lifetime: Self.lifetime, interval: .seconds(5)) {
        case .open(let sid, let session, let providerSessionID):
            #expect(row.expected == .open(expiresAt: session.span.expiresAt, approvedBy: session.origin.approvedBy))
            #expect(sid == Self.sid && providerSessionID == "provider-sid")
            #expect(session.clientID == "desk" && session.subject == "sub-1" && session.providerID == "fc" && session.scopes == ["openid"])
            #expect(session.acr == "eidas1" && session.sealedIdentity == "sealed" && session.span.createdAt == Self.now)
            #expect(session.origin.dpopKey == "k" && session.origin.attested == requester.attested && session.origin.device == nil)
        case .refuse(let error): #expect(row.expected == .refuse(error.code, error.description))
        }
    }

    /// The request's standing before its interval and decision are read: the client first, then
    /// the expiry, to its edge (a request is live strictly before `expiresAt`).
    @Test(
        arguments: [
            ("desk", 5299.999, nil),
            ("desk", 5300, RelayStore.DevicePoll.expired),
            ("desk", 9999, .expired),
            ("other", 5000, .foreign),
            ("other", 9999, .foreign),
        ] as [(String, Double, RelayStore.DevicePoll?)])
    func standing(clientID: String, now: Double, expected: RelayStore.DevicePoll?) {
        #expect(RelayStore.DevicePoll.standing(of: Self.request, clientID: clientID, now: now) == expected)
    }

    /// The poll interval in the store: a second poll `elapsed` after the first is too soon until the
    /// interval has passed, to its edge.
    @Test(arguments: [
        (Duration.zero, RelayStore.DevicePoll.tooSoon),
        (.milliseconds(4999), .tooSoon),
        (.seconds(5), .pending),
        (.seconds(6), .pending),
    ])
    func slowDown(elapsed: Duration, expected: RelayStore.DevicePoll) async throws {
        let clock = ManualClock()
        let sessions = RelayStore(store: EmbeddedStore(clock: clock), settings: RelaisConfiguration().relay, clock: clock)
        let deviceCode = RelayStore.newToken(for: Self.sid)
        var request = Self.request
        request.expiresAt = clock.now + 600
        #expect(try await sessions.saveDeviceRequest(request, deviceCode: deviceCode, userCode: .random()))
        #expect(try await sessions.pollDevice(deviceCode, clientID: "desk", interval: .seconds(5)) == .pending)
        clock.advance(by: elapsed)
        #expect(try await sessions.pollDevice(deviceCode, clientID: "desk", interval: .seconds(5)) == expected)
    }
}
