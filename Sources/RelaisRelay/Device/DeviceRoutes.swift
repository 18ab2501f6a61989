import Hummingbird
import Logging
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// Sign-in on another device (RFC 8628), for the device and for the app that approves:
/// - `POST /device_authorization` (the device): a device code, a user code and where to send the
///   person, as RFC 8628 §3.2 says.
/// - `POST /device/inspect` and `POST /device/approve` (the signed-in app, with its access token):
///   which app and device asked, then approve or deny. The device's session is the approving
///   person's, for the device's own app, with the device's scopes and the approving sign-in's acr.
struct DeviceRoutes: RelayRoutes {
    let issuer: String
    let apps: [String: AppSettings]
    let bearer: BearerAuthenticator
    let sessions: RelayStore
    let limiter: RateLimiter
    let events: SecurityEventLog

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.surface(.json, limitedBy: limiter).post("/device_authorization") { request, context in try await authorize(request, context: context) }
        let approving = router.surface(.bearer, limitedBy: limiter)
        approving.post("/device/inspect") { request, context in
            let approval = try await approvable(request, context: context, url: issuer + "/device/inspect")
            return RelayResponse.json(.ok, Self.describe(approval.found.request, apps: apps, now: sessions.clock.now))
        }
        approving.post("/device/approve") { request, context in try await approve(request, context: context) }
    }

    private func authorize(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        let client = try await ClientForm.read(request, context, apps: apps, limiter: limiter)
        let (form, app, clientID) = (client.form, client.app, client.app.clientID)
        guard app.deviceGrant != nil else { throw RelayError(.unauthorizedClient, "this app is not registered for the device grant (apps.\(clientID).device_grant)") }
        let scopes = form["scope"].map { $0.split(separator: " ").map(String.init) } ?? app.scopes
        guard scopes.contains("openid") else { throw RelayError(.invalidScope, "scope must include openid") }
        if let extra = scopes.first(where: { !app.scopes.contains($0) }) { throw RelayError(.invalidScope, "the app may not ask for the scope '\(extra)'") }
        let device = try Self.deviceName(form["device_name"])
        let lifetime = sessions.settings.deviceCodeLifetime
        let now = sessions.clock.now
        var record = RelayStore.DeviceRequest(clientID: clientID, scopes: scopes, device: device, expiresAt: now + Double(lifetime.components.seconds))
        record.requestedAt = now
        let address = ClientAddress.resolve(request, context: context, trustedProxies: limiter.trustedProxies)
        record.requesterAddress = address == "unknown" ? nil : address
        let deviceCode = RelayStore.newToken(for: RelayStore.newSessionID())
        // A new user code when its first half is taken by a live request (1 in 160,000 per request).
        for _ in 0..<8 {
            let userCode = UserCode.random()
            guard try await sessions.saveDeviceRequest(record, deviceCode: deviceCode, userCode: userCode) else { continue }
            let complete = FormParameters.url(issuer + "/device", adding: [("user_code", userCode.display)])
            return RelayResponse.json(
                .ok,
                .object([
                    "device_code": .string(deviceCode), "user_code": .string(userCode.display), "verification_uri": .string(issuer + "/device"),
                    "verification_uri_complete": .string(complete), "expires_in": .number(Double(lifetime.components.seconds)),
                    "interval": .number(Double(sessions.settings.devicePollInterval.components.seconds)),
                ]))
        }
        throw RelayError(.temporarilyUnavailable, "no free user code right now; retry shortly")
    }

    private func approve(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        let approval = try await approvable(request, context: context, url: issuer + "/device/approve")
        let (access, session, found) = (approval.access, approval.session, approval.found)
        let decision = approval.form["decision"] ?? "approve"
        guard decision == "approve" || decision == "deny" else { throw RelayError.invalidRequest("decision must be approve or deny") }
        var outcome = RelayStore.DeviceDecision.denied
        if decision == "approve" {
            outcome = RelayStore.DeviceDecision(
                approved: true, subject: session.subject, providerID: session.providerID, acr: session.acr, sealedIdentity: session.sealedIdentity,
                providerSessionID: nil, via: "app"
            )
            outcome.approverSID = access.sid
        }
        guard try await sessions.decideDevice(found.sid, outcome) else { throw RelayError(.invalidUserCode, "this request was already decided") }
        events.record(
            .deviceDecided, client: found.request.clientID, provider: session.providerID, sid: access.sid, subject: session.subject, [("decision", decision)]
        )
        context.logger.info("device request decided", metadata: ["client_id": "\(found.request.clientID)", "approver": "\(access.clientID)", "decision": "\(decision)"])
        var answer = Self.describe(found.request, apps: apps, now: sessions.clock.now)
        if case .object(var object) = answer {
            object["approved"] = .bool(decision == "approve")
            answer = .object(object)
        }
        return RelayResponse.json(.ok, answer)
    }

    /// A request a signed-in app may decide, with what it takes.
    struct Approval {
        var access: BearerAuthenticator.AccessToken
        var session: SessionRecord
        var found: (sid: String, request: RelayStore.DeviceRequest)
        var form: FormParameters
    }

    /// The approving app's token, the user code it read, and the request it names, with every
    /// rule of the device app checked. A device session outlives the token that approved it, so a
    /// token alone is not enough: by default it must be DPoP-bound (a stolen bearer token cannot
    /// be replayed here) and its sign-in recent.
    private func approvable(_ request: Request, context: RelaisRequestContext, url: String) async throws -> Approval {
        let access = try await bearer.authenticate(request, session: .alive, target: .init(method: "POST", url: url))
        let form = try await ClientForm.form(request)
        if let limited = await limiter.checkUserCode(approver: access.sid, logger: context.logger) { throw limited }
        guard let typed = form["user_code"], let userCode = UserCode(typed: typed) else { throw RelayError(.invalidUserCode, "user_code is not a user code (XXXX-XXXX)") }
        guard case .found(let sid, let found) = try await sessions.deviceRequest(userCode: userCode) else {
            throw RelayError(.invalidUserCode, Self.noSuchRequest)
        }
        guard let grant = apps[found.clientID]?.deviceGrant, grant.approvers.contains(access.clientID) else {
            throw RelayError(.unauthorizedClient, "this app may not approve requests of \(found.clientID) (apps.\(found.clientID).device_approvers)")
        }
        if grant.attestedApprovers, access.attested == nil {
            throw RelayError(.unauthorizedClient, "only an attested app instance may approve requests of \(found.clientID)")
        }
        if grant.approverProof == .dpop, access.jkt == nil {
            var error = RelayError.invalidToken(
                "approving a device needs a DPoP-bound access token, presented with a proof (apps.\(found.clientID).device_approvers_proof)"
            )
            error.challengesDPoP = true
            throw error
        }
        guard let session = try await sessions.session(access.sid) else { throw RelayError.invalidToken("the session has ended") }
        let maxAge = Int(grant.approvalMaxAge.components.seconds)
        // A session that another one's approval opened is as recent as that approval, not as the
        // person's sign-in behind it: approving with it would chain approvals without anybody
        // signing in again. Only a sign-in on this device approves.
        if session.span.createdAt < sessions.clock.now - Double(maxAge) || session.origin.approvedBy != nil {
            var error = RelayError.insufficientUserAuthentication(
                "approving a device needs a sign-in of the last \(maxAge) s: sign the person in again", .init(acrValues: nil, maxAge: maxAge)
            )
            error.challengesDPoP = access.jkt != nil
            throw error
        }
        return Approval(access: access, session: session, found: (sid, found), form: form)
    }

    /// One answer for every wrong code, so that guesses learn nothing about live requests.
    static let noSuchRequest = "no device is waiting with this user code, or the code is wrong: check the code the device shows"

    /// What the person is asked to approve: first what Relais knows (the app's configured name,
    /// when and from where it asked), then what the device wrote about itself (`device`), which an
    /// app must show as the device's own words.
    static func describe(_ request: RelayStore.DeviceRequest, apps: [String: AppSettings], now: Double) -> JSONValue {
        .object([
            "client_id": .string(request.clientID), "app_name": .string(apps[request.clientID]?.name ?? request.clientID),
            "requested_at": request.requestedAt.map { .number($0.rounded(.down)) } ?? .null,
            "requester_address": request.requesterAddress.map(JSONValue.string) ?? .null,
            "device": request.device.map(JSONValue.string) ?? .null, "device_written_by": .string("requester"),
            "scope": .string(request.scopes.joined(separator: " ")), "expires_in": .number(max(0, (request.expiresAt - now).rounded(.down))),
        ])
    }

    /// A label shown to people: short, printable, no markup worries (pages escape it anyway).
    static func deviceName(_ name: String?) throws -> String? {
        guard let name, !name.isEmpty else { return nil }
        guard name.count <= 64, name.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace || $0 == " " }),
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format })
        else { throw RelayError.invalidRequest("device_name must be at most 64 printable characters") }
        return name
    }
}
