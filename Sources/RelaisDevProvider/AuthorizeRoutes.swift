import Hummingbird
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisServer
import RelaisStore

/// `/authorize` (GET and POST), then the interaction: the login page and its form.
struct AuthorizeRoutes {
    let provider: DevProvider

    func register(on router: Router<RelaisRequestContext>) {
        let prefix = provider.prefix
        router.get("\(prefix)/authorize") { request, _ in
            try await authorize(FormParameters.query(of: request), request: request)
        }
        router.post("\(prefix)/authorize") { request, _ in
            try await authorize(try await FormParameters.body(of: request, limit: 64 * 1024), request: request)
        }
        router.get("\(prefix)/interaction/:uid") { request, context in
            try await interactionPage(uid: context.parameters.get("uid") ?? "", request: request)
        }
        router.post("\(prefix)/interaction/:uid/login") { request, context in
            try await login(uid: context.parameters.get("uid") ?? "", request: request)
        }
    }

    private func authorize(_ parameters: FormParameters?, request: Request) async throws -> Response {
        guard let parameters else {
            return DevProvider.html(.badRequest, Pages.error(code: "Y030007", message: "The request parameters cannot be read."))
        }
        let faults = try await provider.faults.take([.authorize], clientID: parameters["client_id"])
        if let failure = await DevProvider.preempt(faults, on: .authorize) {
            return DevProvider.html(failure.status, Pages.error(code: "DP_INJECTED_FAILURE", message: "Injected failure: HTTP \(failure.status.code)."))
        }
        switch provider.validator.validate(parameters) {
        case .errorPage(let page):
            return DevProvider.html(.badRequest, Pages.error(code: page.code, message: page.message))
        case .redirectError(let redirectURI, let state, let error, let description):
            return DevProvider.redirect(to: errorRedirect(redirectURI, state: state, error: error, description: description))
        case .valid(let authorization):
            let uid = SecureRandom.token(bits: 128)
            try await provider.store.set(StoreKeys.interaction(uid), StoredJSON.encode(Interaction(request: authorization)), ttl: DevProvider.interactionLifetime)
            return DevProvider.redirect(to: "\(provider.configuration.server.publicBaseURL)\(provider.prefix)/interaction/\(uid)")
        }
    }

    private func interactionPage(uid: String, request: Request) async throws -> Response {
        guard let interaction = StoredJSON.decode(Interaction.self, try await provider.store.get(StoreKeys.interaction(uid))) else {
            return Self.expiredPage()
        }
        var signedIn: TestIdentity?
        if !interaction.request.prompt.contains("login"), let sessionID = provider.cookieSessionID(request),
            let session = StoredJSON.decode(BrowserSession.self, try await provider.store.get(StoreKeys.session(sessionID)))
        {
            signedIn = provider.identities[session.identityID]
        }
        return DevProvider.html(
            .ok,
            Pages.login(
                actionURL: "\(provider.prefix)/interaction/\(uid)/login",
                client: interaction.request.clientID,
                // ProConnect's idp_hint: only that identity provider's agents.
                identities: provider.configuration.identities.filter { interaction.request.idpHint == nil || $0.claims["idp_id"] == interaction.request.idpHint },
                signedInAs: signedIn,
                mode: provider.configuration.provider.mode
            )
        )
    }

    private func login(uid: String, request: Request) async throws -> Response {
        guard let form = try await FormParameters.body(of: request, limit: 16 * 1024) else {
            return DevProvider.html(.badRequest, Pages.error(code: "Y030007", message: "The login form cannot be read."))
        }
        let cancelled = form["cancel"] != nil
        let identity = form["identity"].flatMap { provider.identities[$0] != nil ? $0 : nil }
        if !cancelled && identity == nil {
            return DevProvider.html(.badRequest, Pages.error(code: "Y030007", message: "Choose one of the listed identities."))
        }
        // One form, one outcome: consuming the interaction makes a double submit harmless.
        guard let interaction = StoredJSON.decode(Interaction.self, try await provider.store.getAndDelete(StoreKeys.interaction(uid))) else {
            return Self.expiredPage()
        }
        guard let identity, !cancelled else {
            let authorization = interaction.request
            return DevProvider.redirect(
                to: errorRedirect(authorization.redirectURI, state: authorization.state, error: "access_denied", description: "User auth aborted")
            )
        }
        var authorization = interaction.request
        if provider.configuration.provider.mode == .proconnect {
            // The level is the one the agent's identity provider asserts; a service that requires
            // another is refused.
            let claims = provider.identities[identity]?.claims ?? [:]
            if let hint = authorization.idpHint, claims["idp_id"] != hint {
                return DevProvider.html(.badRequest, Pages.error(code: "Y000400", message: "This agent does not sign in with the identity provider the service named."))
            }
            let level = claims["acr"] ?? "eidas1"
            if let required = authorization.essentialACR, !required.contains(level) {
                return DevProvider.redirect(
                    to: errorRedirect(authorization.redirectURI, state: authorization.state, error: "access_denied", description: "requested ACRs could not be satisfied")
                )
            }
            authorization.acr = level
        }
        let now = provider.now()
        // The same person continuing keeps their session and its auth_time; anyone else starts a new one.
        var sessionID = SecureRandom.token(bits: 256)
        var authTime = now
        if let existing = provider.cookieSessionID(request),
            let session = StoredJSON.decode(BrowserSession.self, try await provider.store.get(StoreKeys.session(existing))),
            session.identityID == identity, !authorization.prompt.contains("login")
        {
            sessionID = existing
            authTime = session.authTime
        }
        let lifetime = provider.configuration.provider.sessionLifetime
        try await provider.store.set(StoreKeys.session(sessionID), StoredJSON.encode(BrowserSession(identityID: identity, authTime: authTime)), ttl: lifetime)

        let code = SecureRandom.token(bits: 256)
        let grant = CodeGrant(request: authorization, identityID: identity, authTime: authTime, sessionID: sessionID)
        try await provider.store.set(StoreKeys.code(code), StoredJSON.encode(grant), ttl: provider.configuration.provider.codeLifetime)

        var parameters = [("code", code), ("state", authorization.state)]
        if provider.configuration.provider.mode != .v1 { parameters.append(("iss", provider.issuer)) }
        var headers = HTTPFields()
        headers[.setCookie] = "\(DevProvider.sessionCookie)=\(sessionID); Path=/; Max-Age=\(lifetime.components.seconds); HttpOnly; SameSite=Lax"
        return DevProvider.redirect(to: FormParameters.url(authorization.redirectURI, adding: parameters), headers: headers)
    }

    /// The error redirect FranceConnect sends back to a registered redirect URI (RFC 9207 `iss` included).
    private func errorRedirect(_ redirectURI: String, state: String?, error: String, description: String) -> String {
        var parameters = [("error", error), ("error_description", description)]
        if let state { parameters.append(("state", state)) }
        if provider.configuration.provider.mode != .v1 { parameters.append(("iss", provider.issuer)) }
        return FormParameters.url(redirectURI, adding: parameters)
    }

    private static func expiredPage() -> Response {
        DevProvider.html(.badRequest, Pages.error(code: "DP_INTERACTION_EXPIRED", message: "This sign-in has expired or was already completed. Start again from the service."))
    }
}
