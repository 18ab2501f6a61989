import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisOIDC
import RelaisServer

/// Logout. In the browser: `GET /logout?client_id&post_logout_redirect_uri&state[&id_token_hint]`
/// (or the same as a form, `POST /logout`) ends the Relais session named by the hint, sends the
/// browser through the provider's end-session endpoint (with the provider's own id_token as hint),
/// then back to the app, or to a "signed out" page without `post_logout_redirect_uri`. A hint
/// older than a session lives, or minted for another session, is refused; a navigation the browser
/// says comes from another site, a sibling subdomain included (`Sec-Fetch-Site`), gets a
/// confirmation page (`POST /logout/confirm`) instead, so no other site can sign a person out
/// behind their back. From an API: `POST /logout` with an access token or a `refresh_token` (with
/// a proof by its key when it is DPoP-bound) ends the session, 204.
struct LogoutRoutes: RelayRoutes {
    let apps: [String: AppSettings]
    let providers: [String: UpstreamProvider]
    let vault: SessionVault
    let tokens: TokenSessions
    let bearer: BearerAuthenticator
    let events: SecurityEventLog

    var sessions: RelayStore { tokens.sessions }

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let page = router.surface(.page)
        page.get("/logout") { request, context in
            guard let parameters = FormParameters.query(of: request), parameters.firstRepeatedName == nil else {
                throw RelayError.invalidRequest("The logout parameters cannot be read.")
            }
            return try await browserLogout(parameters, crossSite: SecFetchSite.isFromElsewhere(request), context: context)
        }
        page.post("/logout/confirm") { request, context in
            // The confirmation page's own form: a cross-site post of it proves nothing.
            guard SecFetchSite.isSameOrigin(request, issuer: bearer.issuer) else {
                throw RelayError(.invalidRequest, "Confirm the sign-out from Relais' own page.", page: .notFromOurPage)
            }
            guard let form = try await FormParameters.body(of: request, limit: 16 * 1024), form.firstRepeatedName == nil else {
                throw RelayError.invalidRequest("The logout parameters cannot be read.")
            }
            return try await browserLogout(form, crossSite: false, context: context)
        }
        page.get("/logout/callback") { request, _ in try await providerReturned(request) }
        // The advertised end_session_endpoint, which RP-Initiated Logout §2 says takes POST too:
        // without an access token or a refresh_token, a browser's form, answered as GET is.
        router.post("/logout") { request, context in
            if request.headers[.authorization] != nil { return try await Self.on(.bearer, context) { try await bearerLogout(request) } }
            let form: FormParameters?
            do { form = try await FormParameters.body(of: request, limit: 16 * 1024) } catch { return try RelayError.rendered(error, .bearer, context) }
            guard let form, form["refresh_token"] == nil else { return try await Self.on(.bearer, context) { try await refreshLogout(request, form) } }
            // A browser's logout names what it ends or where it returns, or the browser says it
            // navigates; anything else is an app's request that lacks its token (a misspelt
            // refresh_token, RFC 6750's access_token field): refused, never "signed out".
            guard SecFetchSite.isNavigation(request) || form["id_token_hint"] != nil || form["post_logout_redirect_uri"] != nil else {
                return try RelayError.rendered(
                    RelayError.invalidRequest("POST /logout takes a Bearer access token or the session's refresh_token (a browser: id_token_hint)"), .bearer,
                    context)
            }
            return try await Self.on(.page, context) {
                guard form.firstRepeatedName == nil else { throw RelayError.invalidRequest("The logout parameters cannot be read.") }
                return try await browserLogout(form, crossSite: SecFetchSite.isFromElsewhere(request), context: context)
            }
        }
    }

    /// `body`'s refusals rendered on `surface`: `POST /logout` answers an app in JSON, a browser
    /// with a page.
    private static func on(_ surface: RelayError.Surface, _ context: RelaisRequestContext, _ body: () async throws -> Response) async throws -> Response {
        do { return try await body() } catch { return try RelayError.rendered(error, surface, context) }
    }

    private func browserLogout(_ parameters: FormParameters, crossSite: Bool, context: RelaisRequestContext) async throws -> Response {
        // Without client_id, the app the id_token_hint was issued to (OpenID Connect RP-Initiated
        // Logout §2: client_id is optional beside the hint).
        let named = parameters["client_id"] ?? parameters["id_token_hint"].flatMap(tokens.clientOfLogoutHint)
        guard let clientID = named, let app = apps[clientID] else {
            throw RelayError(.unknownClient, "No app is registered with this client_id (give client_id, or an id_token_hint Relais issued).")
        }
        let target = parameters["post_logout_redirect_uri"]
        if let target, !app.postLogoutRedirectURIs.contains(target) {
            throw RelayError(.invalidRedirectURI, "This post_logout_redirect_uri is not registered for the app.")
        }
        // post_logout_redirect_uri is optional (RP-Initiated Logout §2): without it, a page says so.
        let back = Self.back(to: LogoutTransaction(redirectURI: target, state: parameters["state"]))
        guard let hint = parameters["id_token_hint"] else { return back }  // no session named: nothing to end
        let sid: String
        let session: SessionRecord?
        let live: Bool
        switch try await tokens.logoutHint(hint, clientID: clientID) {
        case .none, .ended: return back
        case .refused(let reason, let message): throw RelayError(.invalidRequest, reason, page: message)
        case .live(let named, let record): (sid, session, live) = (named, record, true)
        case .signedOut(let named, let record): (sid, session, live) = (named, record, false)
        }
        if crossSite { return Self.confirmationPage(parameters, appName: app.name ?? clientID) }
        if live {
            try await sessions.revoke(sid, reason: .logout)
            context.logger.info("session ended by logout", metadata: ["client_id": "\(clientID)"])
        } else {
            // Ended by POST /logout already: only the provider's session is left, once.
            try? await sessions.forgetSignedOut(sid)
        }
        func ended(_ scope: String) {
            guard live || scope == "provider" else { return }  // its end at Relais was recorded already
            events.record(.logout, client: clientID, provider: session?.providerID, sid: sid, subject: session?.subject, [("scope", scope)])
        }
        guard let session, let provider = providers[session.providerID], let identity = vault.open(SessionIdentity.self, session.sealedIdentity) else {
            ended("app")
            return back
        }
        // The provider's session ends too, or the next sign-in would skip the login page.
        let state = SecureRandom.token(bits: 256)
        guard let endSession = await provider.endSessionURL(idTokenHint: identity.providerIDToken, state: state) else {
            ended("app")
            return back
        }
        // The Relais session has ended: a store failure now must not show the person an error,
        // only skip the provider's step (Relais could not take them back from it).
        do {
            try await sessions.saveLogout(LogoutTransaction(redirectURI: target, state: parameters["state"]), state: state)
        } catch {
            context.logger.warning("provider logout skipped: the logout could not be saved", metadata: ["error": "\(error)"])
            ended("app")
            return back
        }
        ended("provider")
        return RelayResponse.redirect(endSession)
    }

    private func providerReturned(_ request: Request) async throws -> Response {
        guard let state = FormParameters.query(of: request)?["state"], !state.isEmpty else {
            throw RelayError.invalidRequest("The provider's answer carries no state.")
        }
        guard let transaction = try await sessions.takeLogout(state: state) else {
            throw RelayError(.transactionExpired, "This logout has expired or was already completed. You are signed out.")
        }
        return Self.back(to: transaction)
    }

    /// Where a finished logout goes: back to the app with its `state`, or, when it named no
    /// `post_logout_redirect_uri`, a page saying the person is signed out.
    static func back(to transaction: LogoutTransaction) -> Response {
        guard let target = transaction.redirectURI else {
            let strings = PageContext.now.strings
            return RelayResponse.html(
                .ok, title: strings[.loggedOutTitle], body: #"<h1 id="logged-out">\#(strings[.loggedOutTitle])</h1><p>\#(strings[.loggedOutText])</p>"#)
        }
        return RelayResponse.redirect(FormParameters.url(target, adding: transaction.state.map { [("state", $0)] } ?? []))
    }

    private func bearerLogout(_ request: Request) async throws -> Response {
        let access = try await bearer.authenticate(request, session: .none, target: .init(method: "POST", url: bearer.issuer + "/logout"))
        // A token minted for an API only: the API that received it must not end the session.
        guard access.facts.audiences.contains(bearer.issuer) else { throw RelayError.invalidToken("the access token is not for Relais (aud)") }
        return try await apiLogout(access.sid, client: access.clientID, subject: access.subject)
    }

    private func refreshLogout(_ request: Request, _ form: FormParameters?) async throws -> Response {
        guard let form, let token = form["refresh_token"], let clientID = form["client_id"] else {
            throw RelayError.invalidRequest("send a Bearer access token, or client_id and refresh_token")
        }
        if let repeated = form.firstRepeatedName { throw RelayError.invalidRequest("the parameter '\(repeated)' is given more than once") }
        guard let found = try await tokens.session(ofToken: token, clientID: clientID, hint: "refresh_token") else {
            throw RelayError.invalidGrant("the refresh token is unknown")
        }
        if let key = try await sessions.session(found)?.origin.dpopKey {
            try await bearer.dpop.possession(request, thumbprint: key, url: bearer.issuer + "/logout", client: clientID)
        }
        return try await apiLogout(found, client: clientID, subject: nil)
    }

    private func apiLogout(_ sid: String, client: String?, subject: String?) async throws -> Response {
        // Kept first, best effort: a GET /logout that follows still ends the provider's session.
        if let kept = try? await sessions.storedSession(sid) { try? await sessions.keepSignedOut(sid, stored: kept.stored) }
        try await sessions.revoke(sid, reason: .logout)
        events.record(.logout, client: client, sid: sid, subject: subject, [("scope", "app")])
        return RelayResponse.done(.noContent)
    }

    /// Asked when another site sent the person here: signing out is their choice, not the site's.
    static func confirmationPage(_ parameters: FormParameters, appName: String) -> Response {
        let strings = PageContext.now.strings
        let fields = ["client_id", "post_logout_redirect_uri", "state", "id_token_hint"].compactMap { name in
            parameters[name].map { #"<input type="hidden" name="\#(name)" value="\#(HTMLText.escape($0))">"# }
        }.joined()
        return RelayResponse.html(
            .ok, title: strings[.logoutTitle],
            body: """
                <h1>\(strings[.logoutTitle])</h1>
                <p>\(strings.format(.logoutAsked, #"<strong id="logout-app">\#(HTMLText.escape(appName))</strong>"#))</p>
                <form method="post" action="/logout/confirm">\(fields)<button id="logout-confirm">\(strings[.logoutConfirm])</button></form>
                """)
    }
}
