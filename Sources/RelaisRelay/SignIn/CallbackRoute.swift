import HTTPTypes
import Hummingbird
import Logging
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisOIDC
import RelaisServer

/// `GET /callback`: the provider sends the browser back. The transaction is consumed first (a
/// replayed callback finds nothing), then the code is exchanged and every token checked; the app
/// gets a one-time Relais code, or an OAuth error it can act on.
struct CallbackRoute: RelayRoutes {
    let providers: [String: UpstreamProvider]
    let sessions: RelayStore
    let vault: SessionVault
    let limiter: RateLimiter
    let events: SecurityEventLog
    let issuer: String
    let cookies: BrowserCookies

    /// Clock difference taken between the provider and Relais, for `auth_time` against `max_age`.
    static let clockLeeway = 60.0

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.surface(.page, limitedBy: limiter).get("/callback") { request, context in try await callback(request, context: context) }
    }

    private func callback(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        guard let parameters = FormParameters.query(of: request), parameters.firstRepeatedName == nil else {
            throw RelayError.invalidRequest("The provider's answer cannot be read.")
        }
        guard let state = parameters["state"], !state.isEmpty else { throw RelayError.invalidRequest("The provider's answer carries no state.") }
        let transaction: LoginTransaction?
        do {
            transaction = try await sessions.takeTransaction(state: state)
        } catch {
            context.logger.error("store unavailable at callback", metadata: ["error": "\(error)"])
            RelayMetrics.signIn(provider: "unknown", client: "unknown", outcome: "store_unavailable")
            events.record(.signInFailed, reason: RelayError.Code.temporarilyUnavailable.rawValue)
            throw RelayError(.temporarilyUnavailable, "Relais cannot read the sign-in right now.")
        }
        guard let transaction else {
            RelayMetrics.signIn(provider: "unknown", client: "unknown", outcome: "transaction_expired")
            events.record(.signInFailed, reason: RelayError.Code.transactionExpired.rawValue)
            throw RelayError(.transactionExpired, "This sign-in has expired or was already completed.")
        }
        let app = transaction.app
        func back(_ fields: [(String, String)]) -> Response {
            var fields = fields
            if let state = app.state { fields.append(("state", state)) }
            fields.append(("iss", issuer))
            return RelayResponse.redirect(FormParameters.url(app.redirectURI, adding: fields))
        }
        func fail(_ error: RelayError, outcome: String) -> Response {
            RelayMetrics.signIn(provider: app.upstream.providerID, client: app.clientID, outcome: outcome)
            events.record(
                error.code == .stepUpIdentityMismatch ? .stepUpRefused : .signInFailed, reason: error.code.rawValue, client: app.clientID, provider: app.upstream.providerID
            )
            // A sign-in at /device has no app to go back to: the person reads the page, which
            // leads back to the device's.
            guard transaction.deviceSID != nil else { return error.redirect(to: app.redirectURI, state: app.state, issuer: issuer) }
            var page = PageContext.now
            page.back = "/device"
            return PageContext.$current.withValue(page) { error.page(requestID: context.requestID) }
        }
        func fail(_ error: UpstreamError) -> Response {
            context.logger.warning("sign-in failed", metadata: ["provider": "\(app.upstream.providerID)", "client_id": "\(app.clientID)", "error": "\(error.description)"])
            return fail(RelayError(upstream: error), outcome: error.code)
        }
        guard cookies.isSameBrowser(request, as: transaction) else {
            context.logger.warning("device sign-in completed in another browser than the one that started it", metadata: ["client_id": "\(app.clientID)"])
            return fail(RelayError(.invalidRequest, "This sign-in was started in another browser.", page: .signInOtherBrowser), outcome: "other_browser")
        }
        guard let provider = providers[app.upstream.providerID] else { return fail(RelayError(.serverError, "the provider is no longer configured"), outcome: "server_error") }
        // RFC 9207: the callback names its issuer, which defeats mix-up attacks between providers.
        if let iss = parameters["iss"] {
            guard iss == provider.settings.issuer else { return fail(.callbackRejected("the callback's iss is not the provider's issuer")) }
        } else if await provider.requiresCallbackIssuer() {
            return fail(.callbackRejected("the callback carries no iss"))
        }
        if let error = parameters["error"] {
            let code = RelayError.Code.fromProvider(error)
            let detail = String((parameters["error_description"] ?? "").prefix(200))
            // Both strings come from the request: the log handlers escape them (no forged lines).
            context.logger.info("provider returned an error", metadata: ["provider": "\(app.upstream.providerID)", "error": "\(error)", "error_description": "\(detail)"])
            let description = "the provider answered \(error)" + (detail.isEmpty ? "" : ": \(detail)")
            return fail(RelayError(code, description), outcome: error == "access_denied" ? "cancelled" : "provider_error")
        }
        guard let code = parameters["code"], !code.isEmpty else { return fail(.callbackRejected("the callback carries no code")) }

        let identity: UpstreamIdentity
        let providerStart = ContinuousClock.now
        do {
            identity = try await provider.signIn(
                code: code, redirectURI: issuer + "/callback", nonce: transaction.providerNonce, requestedACR: app.upstream.acr,
                codeVerifier: transaction.providerCodeVerifier
            )
        } catch {
            return fail(error)
        }
        if let maxAge = app.upstream.maxAge {
            // OpenID Connect Core §3.1.2.1: a sign-in at most max_age old, and an auth_time in the
            // id_token. The provider was asked for a new login (prompt=login); one whose auth_time
            // is older did not make one, and one that gives none cannot show it did (fail closed:
            // the app's max_age is never dropped).
            guard let said = identity.authTime else {
                return fail(.callbackRejected("the provider gave no auth_time, so the app's max_age cannot be held"))
            }
            guard sessions.clock.now - said <= Double(maxAge) + Self.clockLeeway else {
                return fail(.callbackRejected("the provider's sign-in (auth_time) is older than the app's max_age"))
            }
        }
        // Time spent waiting for the provider (token, userinfo, JWKS), so operators and the
        // benchmark can tell Relais' own latency from the provider's (Server-Timing, W3C).
        let (seconds, attoseconds) = (ContinuousClock.now - providerStart).components
        let providerMilliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        if let deviceSID = transaction.deviceSID {
            return await approveDevice(deviceSID, identity: identity, app: app, context: context, fail: fail)
        }
        // A step-up (RFC 9470) replaces the app's session only for the same person: FranceConnect
        // and FranceConnect+ give one person different subs, so the identity pivot decides.
        var replaces: String?
        if let previous = app.upstream.stepUpOf {
            do {
                if let session = try await sessions.session(previous), session.clientID == app.clientID {
                    guard let old = await vault.openIdentityAfterSync(session.sealedIdentity), IdentityPivot.matches(old.claims, identity.claims) else {
                        context.logger.warning("step-up by another person refused", metadata: ["provider": "\(app.upstream.providerID)", "client_id": "\(app.clientID)"])
                        return fail(
                            RelayError(.stepUpIdentityMismatch, "the person who signed in is not the person of the app's session, which stays as it was"),
                            outcome: "step_up_identity_mismatch"
                        )
                    }
                    replaces = previous
                }
            } catch {
                context.logger.error("store unavailable at callback", metadata: ["error": "\(error)"])
                return fail(RelayError(.temporarilyUnavailable, "Relais cannot read the app's session right now; try again shortly"), outcome: "store_unavailable")
            }
        }
        // The code carries the sign-in sealed and names the session it will open (``SealedCode``):
        // nothing is stored until /token opens that session.
        let secret = SessionTokens.newSecret()
        let sealedIdentity = SessionIdentity(
            claims: identity.claims, amr: identity.amr, authTime: identity.authTime, providerIDToken: identity.idToken, tokenSecret: secret
        )
        // The app's state goes back beside the code, and /token needs no idp_hint: neither is sealed in.
        var request = app
        (request.state, request.upstream.idpHint) = (nil, nil)
        let sid = RelayStore.newSessionID()
        let relayCode: String
        do {
            let record = RelayCode(
                app: request, subject: identity.subject, acr: identity.acr, sealedIdentity: try vault.seal(sealedIdentity), providerSessionID: identity.sessionID,
                replaces: replaces
            )
            switch sessions.settings.codeFormat {
            case .sealed:
                let deadline = sessions.clock.now + Double(sessions.settings.codeLifetime.components.seconds)
                relayCode = try SealedCode(sid: sid, record: record, expiresAt: deadline).seal(with: vault)
            case .stored:
                do {
                    relayCode = try await sessions.saveStoredCode(record, sid: sid, secret: secret)
                } catch {
                    context.logger.error("store unavailable at callback", metadata: ["error": "\(error)"])
                    return fail(RelayError(.temporarilyUnavailable, "Relais cannot store the sign-in right now; try again shortly"), outcome: "store_unavailable")
                }
            }
        } catch {
            context.logger.error("the sign-in could not be sealed", metadata: ["error": "\(error)"])
            return fail(RelayError(.serverError, "Relais could not seal the sign-in with its session key"), outcome: "server_error")
        }
        context.logger.info("sign-in completed at the provider", metadata: ["provider": "\(app.upstream.providerID)", "client_id": "\(app.clientID)"])
        RelayMetrics.signIn(provider: app.upstream.providerID, client: app.clientID, outcome: "ok")
        events.record(.signInSucceeded, client: app.clientID, provider: app.upstream.providerID, subject: identity.subject, identity.acr.map { [("acr", $0)] } ?? [])
        var response = back([("code", relayCode)])
        response.headers[HTTPField.Name("Server-Timing")!] = "provider;dur=\((providerMilliseconds * 100).rounded() / 100)"
        return response
    }

    /// A sign-in at `/device` approves the device's request with this identity (RFC 8628); the
    /// device's next poll opens its session.
    private func approveDevice(
        _ sid: String, identity: UpstreamIdentity, app: AppRequest, context: RelaisRequestContext, fail: (RelayError, String) -> Response
    ) async -> Response {
        do {
            let sealed = try vault.seal(SessionIdentity(claims: identity.claims, amr: identity.amr, authTime: identity.authTime, providerIDToken: identity.idToken))
            let decision = RelayStore.DeviceDecision(
                approved: true, subject: identity.subject, providerID: app.upstream.providerID, acr: identity.acr, sealedIdentity: sealed,
                providerSessionID: identity.sessionID, via: "browser"
            )
            guard try await sessions.decideDevice(sid, decision) else {
                return fail(RelayError(.invalidUserCode, "This device's request was already approved or refused.", page: .deviceAlreadyDecided), "device_decided")
            }
        } catch {
            context.logger.error("store unavailable at callback", metadata: ["error": "\(error)"])
            return fail(RelayError(.temporarilyUnavailable, "Relais cannot store the sign-in right now; try again shortly"), "store_unavailable")
        }
        context.logger.info("device request approved by a sign-in", metadata: ["provider": "\(app.upstream.providerID)", "client_id": "\(app.clientID)"])
        RelayMetrics.signIn(provider: app.upstream.providerID, client: app.clientID, outcome: "ok")
        events.record(
            .signInSucceeded, client: app.clientID, provider: app.upstream.providerID, subject: identity.subject, (identity.acr.map { [("acr", $0)] } ?? []) + [("via", "device")]
        )
        let strings = PageContext.now.strings
        return RelayResponse.html(
            .ok, title: strings[.deviceApprovedHeading],
            body: """
                <h1 id="device-approved">\(strings[.deviceApprovedHeading])</h1>
                <p>\(strings[.deviceApprovedText])</p>
                """)
    }
}
