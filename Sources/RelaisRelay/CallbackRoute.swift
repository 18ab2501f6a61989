import FoundationEssentials
import HTTPTypes
import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisOIDC
import RelaisServer
import RelaisStore
import RelaisHTTPClient

/// `GET /callback`: the provider sends the browser back. The transaction is consumed first (a
/// replayed callback finds nothing), then the code is exchanged and every token checked; the app
/// gets a one-time Relais code, or an OAuth error it can act on.
struct CallbackRoute {
    let relay: Relay

    /// Provider errors the app can meaningfully receive as they are; anything else is a server_error.
    static let passedThrough: Set<String> = ["access_denied", "login_required", "consent_required", "interaction_required", "temporarily_unavailable"]

    func register(on router: Router<RelaisRequestContext>) {
        router.get("/callback") { request, context in
            if let wait = await relay.limiter.exceeded(ip: relay.limiter.clientIP(request, context), logger: context.logger) { return RateLimiter.page(retryAfter: wait) }
            return try await callback(request, context: context)
        }
    }

    private func callback(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        guard let parameters = FormParameters.query(of: request), parameters.repeatedNames.isEmpty else {
            return Relay.page(.badRequest, code: "invalid_request", message: "The provider's answer cannot be read.")
        }
        guard let state = parameters["state"], !state.isEmpty else {
            return Relay.page(.badRequest, code: "invalid_request", message: "The provider's answer carries no state.")
        }
        let transaction: LoginTransaction?
        do {
            transaction = StoredJSON.decode(LoginTransaction.self, try await relay.store.getAndDelete(RelayKeys.transaction(state)))
        } catch {
            context.logger.error("store unavailable at callback", metadata: ["error": "\(error)"])
            RelayMetrics.signIn(provider: "unknown", client: "unknown", outcome: "store_unavailable")
            return Relay.page(.serviceUnavailable, code: "temporarily_unavailable", message: "Relais cannot read the sign-in right now.")
        }
        guard let transaction else {
            RelayMetrics.signIn(provider: "unknown", client: "unknown", outcome: "transaction_expired")
            return Relay.page(.badRequest, code: "transaction_expired", message: "This sign-in has expired or was already completed.")
        }
        let app = transaction.app
        guard let provider = relay.providers[app.providerID] else {
            RelayMetrics.signIn(provider: app.providerID, client: app.clientID, outcome: "server_error")
            return relay.errorRedirect(app, error: "server_error", description: "the provider is no longer configured")
        }
        func fail(_ error: UpstreamError) -> Response {
            RelayMetrics.signIn(provider: app.providerID, client: app.clientID, outcome: error.code)
            context.logger.warning("sign-in failed", metadata: ["provider": "\(app.providerID)", "client_id": "\(app.clientID)", "error": "\(error.description)"])
            return relay.errorRedirect(app, error: error.oauthError, description: error.description)
        }
        // RFC 9207: the callback names its issuer, which defeats mix-up attacks between providers.
        if let iss = parameters["iss"] {
            guard iss == provider.settings.issuer else { return fail(.callbackRejected("the callback's iss is not the provider's issuer")) }
        } else if provider.settings.requireCallbackIssuer {
            return fail(.callbackRejected("the callback carries no iss"))
        }
        if let error = parameters["error"] {
            let code = Self.passedThrough.contains(error) ? error : "server_error"
            let detail = String((parameters["error_description"] ?? "").prefix(200))
            context.logger.info("provider returned an error", metadata: ["provider": "\(app.providerID)", "error": "\(error)"])
            RelayMetrics.signIn(provider: app.providerID, client: app.clientID, outcome: error == "access_denied" ? "cancelled" : "provider_error")
            return relay.errorRedirect(app, error: code, description: "the provider answered \(error)" + (detail.isEmpty ? "" : ": \(detail)"))
        }
        guard let code = parameters["code"], !code.isEmpty else { return fail(.callbackRejected("the callback carries no code")) }

        let identity: UpstreamIdentity
        let providerStart = ContinuousClock.now
        do {
            identity = try await provider.signIn(
                code: code, redirectURI: relay.callbackURL, nonce: transaction.providerNonce, requestedACR: app.acr,
                codeVerifier: transaction.providerCodeVerifier
            )
        } catch {
            return fail(error)
        }
        // Time spent waiting for the provider (token, userinfo, JWKS), so operators and the
        // benchmark can tell Relais' own latency from the provider's (Server-Timing, W3C).
        let providerTime = ContinuousClock.now - providerStart
        let providerMilliseconds = Double(providerTime.components.seconds) * 1000 + Double(providerTime.components.attoseconds) / 1e15
        let relayCode = SecureRandom.token(bits: 256)
        do {
            let sealed = try relay.vault.seal(
                SessionIdentity(claims: identity.claims, amr: identity.amr, authTime: identity.authTime, providerIDToken: identity.idToken)
            )
            let record = RelayCode(app: app, subject: identity.subject, acr: identity.acr, sealedIdentity: sealed, providerSessionID: identity.sessionID)
            try await relay.store.set(RelayKeys.code(relayCode), StoredJSON.encode(record), ttl: relay.configuration.relay.codeLifetime)
        } catch {
            context.logger.error("store unavailable at callback", metadata: ["error": "\(error)"])
            RelayMetrics.signIn(provider: app.providerID, client: app.clientID, outcome: "store_unavailable")
            return relay.errorRedirect(app, error: "temporarily_unavailable", description: "Relais cannot store the sign-in right now; try again shortly")
        }
        context.logger.info("sign-in completed at the provider", metadata: ["provider": "\(app.providerID)", "client_id": "\(app.clientID)"])
        RelayMetrics.signIn(provider: app.providerID, client: app.clientID, outcome: "ok")
        var fields = [("code", relayCode)]
        if let state = app.state { fields.append(("state", state)) }
        fields.append(("iss", relay.issuer))
        var response = Relay.redirect(FormParameters.url(app.redirectURI, adding: fields))
        response.headers[HTTPField.Name("Server-Timing")!] = "provider;dur=\((providerMilliseconds * 100).rounded() / 100)"
        return response
    }
}
