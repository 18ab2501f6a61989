import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisOIDC
import RelaisServer
import RelaisStore
import RelaisHTTPClient

/// `GET|POST /authorize`: the app's request is checked, a login transaction is stored, and the
/// browser goes to the provider with Relais' own `state`, `nonce` (and PKCE when the provider takes it).
struct AuthorizeRoute {
    let relay: Relay

    func register(on router: Router<RelaisRequestContext>) {
        router.get("/authorize") { request, context in
            if let wait = await relay.limiter.exceeded(ip: relay.limiter.clientIP(request, context), logger: context.logger) { return RateLimiter.page(retryAfter: wait) }
            return try await authorize(FormParameters.query(of: request), context: context)
        }
        router.post("/authorize") { request, context in
            if let wait = await relay.limiter.exceeded(ip: relay.limiter.clientIP(request, context), logger: context.logger) { return RateLimiter.page(retryAfter: wait) }
            return try await authorize(try await FormParameters.body(of: request, limit: 64 * 1024), context: context)
        }
    }

    private func authorize(_ parameters: FormParameters?, context: RelaisRequestContext) async throws -> Response {
        guard let parameters else { return Relay.page(.badRequest, code: "invalid_request", message: "The request parameters cannot be read.") }
        switch relay.validator.validate(parameters) {
        case .errorPage(let code, let message):
            return Relay.page(.badRequest, code: code, message: message)
        case .redirectError(let redirectURI, let state, let error, let description):
            var fields = [("error", error), ("error_description", description)]
            if let state { fields.append(("state", state)) }
            fields.append(("iss", relay.issuer))
            return Relay.redirect(FormParameters.url(redirectURI, adding: fields))
        case .valid(let app):
            if let wait = await relay.limiter.exceeded(clientID: app.clientID, logger: context.logger) { return RateLimiter.page(retryAfter: wait) }
            guard let provider = relay.providers[app.providerID] else {
                return relay.errorRedirect(app, error: "server_error", description: "the provider is not configured")
            }
            let state = SecureRandom.token(bits: 256)
            let nonce = SecureRandom.token(bits: 256)
            let verifier = provider.settings.pkce ? PKCE.makeVerifier() : nil
            let location: String
            do {
                location = try await provider.authorizationURL(
                    redirectURI: relay.callbackURL, state: state, nonce: nonce, acr: app.acr, prompt: app.forceLogin ? "login" : nil,
                    codeChallenge: verifier.map(PKCE.challenge(for:))
                )
            } catch {
                context.logger.warning("provider unavailable at authorize", metadata: ["provider": "\(app.providerID)", "error": "\(error.code)"])
                return relay.errorRedirect(app, error: error.oauthError, description: error.description)
            }
            do {
                let transaction = LoginTransaction(app: app, providerNonce: nonce, providerCodeVerifier: verifier)
                try await relay.store.set(RelayKeys.transaction(state), StoredJSON.encode(transaction), ttl: relay.configuration.relay.transactionLifetime)
            } catch {
                context.logger.error("store unavailable at authorize", metadata: ["error": "\(error)"])
                return relay.errorRedirect(app, error: "temporarily_unavailable", description: "Relais cannot store the sign-in right now; try again shortly")
            }
            return Relay.redirect(location)
        }
    }
}
