import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisOIDC
import RelaisServer

/// `GET|POST /authorize`: the app's request is checked, a login transaction is stored, and the
/// browser goes to the provider with Relais' own `state`, `nonce` (and PKCE when the provider takes it).
struct AuthorizeRoute: RelayRoutes {
    let validator: AppAuthorizationValidator
    let starter: SignInStarter
    /// Reads `id_token_hint`: the session a step-up would replace.
    let tokens: TokenSessions
    let limiter: RateLimiter
    let issuer: String

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let page = router.surface(.page, limitedBy: limiter)
        page.get("/authorize") { request, context in try await authorize(FormParameters.query(of: request), context: context) }
        page.post("/authorize") { request, context in try await authorize(try await FormParameters.body(of: request, limit: 64 * 1024), context: context) }
    }

    private func authorize(_ parameters: FormParameters?, context: RelaisRequestContext) async throws -> Response {
        guard let parameters else { throw RelayError.invalidRequest("The request parameters cannot be read.") }
        // OpenID Connect's ui_locales: the app's choice of language comes before the browser's.
        if let uiLocales = parameters["ui_locales"], let page = PageContext.current {
            var chosen = page
            chosen.language = PageLanguage.negotiate(uiLocales: uiLocales, acceptLanguage: nil, fallback: page.language)
            // Its refusals are rendered here, while the chosen language is in force.
            return try await PageContext.$current.withValue(chosen) {
                do {
                    return try await authorize(parameters, context: context)
                } catch {
                    return try RelayError.rendered(error, .page, context)
                }
            }
        }
        return try await authorize(parameters, context: context)
    }

    private func authorize(_ parameters: FormParameters, context: RelaisRequestContext) async throws -> Response {
        var app: AppRequest
        switch validator.validate(parameters) {
        case .refused(let error): throw error
        case .redirectError(let error, let redirectURI, let state):
            return error.redirect(to: redirectURI, state: state, issuer: issuer)
        case .valid(let request): app = request
        }
        func refuse(_ error: RelayError) -> Response { error.redirect(to: app.redirectURI, state: app.state, issuer: issuer) }
        if let hint = parameters["id_token_hint"] {
            // Fail closed: a hint that cannot be read must not turn a step-up into a second session.
            guard let sid = tokens.session(ofIDToken: hint, clientID: app.clientID) else {
                return refuse(.invalidRequest("id_token_hint is not an id_token Relais issued to this app"))
            }
            app.upstream.stepUpOf = sid
        }
        if let limited = await limiter.check(clientID: app.clientID, logger: context.logger) { throw limited }
        do {
            return try await starter.start(app, logger: context.logger)
        } catch {
            return refuse(error)
        }
    }
}
