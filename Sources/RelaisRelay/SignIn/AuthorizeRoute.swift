import Hummingbird
import Logging
import RelaisCrypto
import RelaisHTTPClient
import RelaisOIDC
import RelaisServer
import RelaisConfig

/// `GET|POST /authorize`: the app's request is checked, a login transaction is stored, and the
/// browser goes to the provider with Relais' own `state`, `nonce` (and PKCE when the provider takes it).
struct AuthorizeRoute: RelayRoutes {
    let validator: AppAuthorizationValidator
    let providers: [String: UpstreamProvider]
    let sessions: SessionStore
    let limiter: RateLimiter
    let issuer: String

    func register(on router: Router<RelaisRequestContext>) {
        router.get("/authorize") { request, context in
            try await limiter.guarding(.page, request, context) { try await authorize(FormParameters.query(of: request), context: context) }
        }
        router.post("/authorize") { request, context in
            try await limiter.guarding(.page, request, context) {
                try await authorize(try await FormParameters.body(of: request, limit: 64 * 1024), context: context)
            }
        }
    }

    private func authorize(_ parameters: FormParameters?, context: RelaisRequestContext) async throws -> Response {
        guard let parameters else { throw RelayError.invalidRequest("The request parameters cannot be read.") }
        let app: AppRequest
        switch validator.validate(parameters) {
        case .refused(let error): throw error
        case .redirectError(let error, let redirectURI, let state):
            return error.redirect(to: redirectURI, state: state, issuer: issuer)
        case .valid(let request): app = request
        }
        func refuse(_ error: RelayError) -> Response { error.redirect(to: app.redirectURI, state: app.state, issuer: issuer) }
        if let limited = await limiter.check(clientID: app.clientID, logger: context.logger) { throw limited }
        guard let provider = providers[app.providerID] else { return refuse(RelayError(.serverError, "the provider is not configured")) }
        let state = SecureRandom.token(bits: 256)
        let nonce = SecureRandom.token(bits: 256)
        let verifier = provider.settings.pkce ? PKCE.makeVerifier() : nil
        let location: String
        do {
            location = try await provider.authorizationURL(
                redirectURI: issuer + "/callback", state: state, nonce: nonce, acr: app.acr, prompt: app.forceLogin ? "login" : nil,
                codeChallenge: verifier.map(PKCE.challenge(for:))
            )
        } catch {
            context.logger.warning("provider unavailable at authorize", metadata: ["provider": "\(app.providerID)", "error": "\(error.code)"])
            return refuse(RelayError(upstream: error))
        }
        do {
            try await sessions.saveTransaction(LoginTransaction(app: app, providerNonce: nonce, providerCodeVerifier: verifier), state: state)
        } catch {
            context.logger.error("store unavailable at authorize", metadata: ["error": "\(error)"])
            return refuse(RelayError(.temporarilyUnavailable, "Relais cannot store the sign-in right now; try again shortly"))
        }
        return RelayResponse.redirect(location)
    }
}
