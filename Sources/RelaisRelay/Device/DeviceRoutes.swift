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
    let sessions: SessionStore
    let limiter: RateLimiter
    let events: SecurityEventLog

    func register(on router: Router<RelaisRequestContext>) {
        router.post("/device_authorization") { request, context in
            try await limiter.guarding(.json, request, context) { try await authorize(request, context: context) }
        }
        router.post("/device/inspect") { request, context in
            try await limiter.guarding(.bearer, request, context) {
                let (_, request, _) = try await approvable(request, context: context, url: issuer + "/device/inspect")
                return RelayResponse.json(.ok, Self.describe(request.request, apps: apps, now: sessions.clock.now))
            }
        }
        router.post("/device/approve") { request, context in
            try await limiter.guarding(.bearer, request, context) { try await approve(request, context: context) }
        }
    }

    private func authorize(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        let form = try await Self.form(request)
        let client = try PublicClient(request, form)
        let clientID = client.id
        guard let app = apps[clientID] else { throw client.unknown }
        if let limited = await limiter.check(clientID: clientID, logger: context.logger) { throw limited }
        guard app.deviceGrant != nil else { throw RelayError(.unauthorizedClient, "this app is not registered for the device grant (apps.\(clientID).device_grant)") }
        let scopes = form["scope"].map { $0.split(separator: " ").map(String.init) } ?? app.scopes
        guard scopes.contains("openid") else { throw RelayError(.invalidScope, "scope must include openid") }
        if let extra = scopes.first(where: { !app.scopes.contains($0) }) { throw RelayError(.invalidScope, "the app may not ask for the scope '\(extra)'") }
        let device = try Self.deviceName(form["device_name"])
        let lifetime = sessions.settings.deviceCodeLifetime
        let record = SessionStore.DeviceRequest(clientID: clientID, scopes: scopes, device: device, expiresAt: sessions.clock.now + Double(lifetime.components.seconds))
        let deviceCode = SessionStore.newToken(for: SessionStore.newSessionID())
        // A new user code when its first half is taken by a live request (1 in 160,000 per request).
        for _ in 0..<8 {
            let userCode = UserCode.random()
            guard try await sessions.saveDeviceRequest(record, deviceCode: deviceCode, userCode: userCode) else { continue }
            let complete = FormParameters.url(issuer + "/device", adding: [("user_code", userCode.display)])
            return RelayResponse.json(.ok, .object([
                "device_code": .string(deviceCode), "user_code": .string(userCode.display), "verification_uri": .string(issuer + "/device"),
                "verification_uri_complete": .string(complete), "expires_in": .number(Double(lifetime.components.seconds)),
                "interval": .number(Double(sessions.settings.devicePollInterval.components.seconds)),
            ]))
        }
        throw RelayError(.temporarilyUnavailable, "no free user code right now; retry shortly")
    }

    private func approve(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        let (access, found, form) = try await approvable(request, context: context, url: issuer + "/device/approve")
        let decision = form["decision"] ?? "approve"
        guard decision == "approve" || decision == "deny" else { throw RelayError.invalidRequest("decision must be approve or deny") }
        guard let session = try await sessions.session(access.sid) else { throw RelayError.invalidToken("the session has ended") }
        let outcome = decision == "deny" ? SessionStore.DeviceDecision.denied : SessionStore.DeviceDecision(
            approved: true, subject: session.subject, providerID: session.providerID, acr: session.acr, sealedIdentity: session.sealedIdentity,
            providerSessionID: nil, via: "app"
        )
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

    /// The approving app's token, the user code it read, and the request it names, with every
    /// rule of the device app checked.
    private func approvable(
        _ request: Request, context: RelaisRequestContext, url: String
    ) async throws -> (BearerAuthenticator.AccessToken, (sid: String, request: SessionStore.DeviceRequest), FormParameters) {
        let access = try await bearer.authenticate(request, session: .alive, target: .init(method: "POST", url: url))
        let form = try await Self.form(request)
        if let limited = await limiter.checkUserCode(request, context) { throw limited }
        guard let typed = form["user_code"], let userCode = UserCode(typed: typed) else { throw RelayError(.invalidUserCode, "user_code is not a user code (XXXX-XXXX)") }
        switch try await sessions.deviceRequest(userCode: userCode) {
        case .unknown: throw RelayError(.invalidUserCode, "no live request has this user code")
        case .wrong(let dead):
            throw RelayError(.invalidUserCode, dead ? "wrong user code; the request is now denied" : "wrong user code")
        case .found(let sid, let found):
            guard let grant = apps[found.clientID]?.deviceGrant, grant.approvers.contains(access.clientID) else {
                throw RelayError(.unauthorizedClient, "this app may not approve requests of \(found.clientID) (apps.\(found.clientID).device_approvers)")
            }
            if grant.attestedApprovers, access.attested == nil {
                throw RelayError(.unauthorizedClient, "only an attested app instance may approve requests of \(found.clientID)")
            }
            return (access, (sid, found), form)
        }
    }

    /// What the person is asked to approve.
    static func describe(_ request: SessionStore.DeviceRequest, apps: [String: AppSettings], now: Double) -> JSONValue {
        .object([
            "client_id": .string(request.clientID), "device": request.device.map(JSONValue.string) ?? .null,
            "scope": .string(request.scopes.joined(separator: " ")), "expires_in": .number(max(0, (request.expiresAt - now).rounded(.down))),
        ])
    }

    static func form(_ request: Request) async throws -> FormParameters {
        guard let form = try await FormParameters.body(of: request, limit: 16 * 1024) else {
            throw RelayError.invalidRequest("the body must be an application/x-www-form-urlencoded form of at most \(FormParameters.maxFields) fields")
        }
        if let repeated = form.firstRepeatedName { throw RelayError.invalidRequest("the parameter '\(repeated)' is given more than once") }
        return form
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
