import HTTPTypes
import Hummingbird
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// From app tokens to a web session in the app's webview (what Cozy's flagship app calls a
/// session code):
/// - `POST /session_code` with the app's access token (and its DPoP proof when bound), optional
///   form field `target` among the app's `web_targets` → a one-time code (256 bits, 60 s, stored by
///   hash, bound to the session and the target) and the URL to open. The web session it opens
///   lives as long as the app's session, far longer than the access token: a capability that
///   outlives the token needs a stronger proof than the token (which every API the app calls
///   sees). A DPoP-bound token is proven by its key; an unbound one needs the session's refresh
///   token beside it (form field `refresh_token`), which only the app holds.
/// - `GET /session?code=…` in the webview: the code is consumed and the web session written in one
///   atomic step; the cookie is set and the browser goes to the target. Any refusal is an HTML page
///   that never redirects.
///
/// Login CSRF: another site's link must not sign a browser into someone else's session. A code is
/// refused when the browser says another site started the navigation, a sibling subdomain included
/// (webviews an app opens send `none`),
/// and a web session of another person is never replaced silently: a page says who is signed in
/// and asks (`POST /session` with the code, from that page only).
struct SessionCodeRoutes: RelayRoutes {
    let issuer: String
    let apps: [String: AppSettings]
    let bearer: BearerAuthenticator
    let webSessions: WebSessionAuthenticator
    let sessions: RelayStore
    let vault: SessionVault
    let limiter: RateLimiter
    /// Development only: the target of an app with no `web_targets` (the demo's web page).
    let developmentTarget: String?

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.surface(.bearer, limitedBy: limiter).post("/session_code") { request, _ in try await issue(request) }
        let page = router.surface(.page, limitedBy: limiter)
        page.get("/session") { request, context in
            guard let query = FormParameters.query(of: request), query.firstRepeatedName == nil else { throw Self.invalid }
            return try await open(request, code: query["code"], confirmed: false)
        }
        page.post("/session") { request, context in
            guard SecFetchSite.isSameOrigin(request, issuer: issuer) else {
                throw RelayError(.invalidSessionCode, "Confirm from Relais' own page: this form was not sent from it.", page: .notFromOurPage)
            }
            guard let form = try await FormParameters.body(of: request, limit: 4096), form.firstRepeatedName == nil else { throw Self.invalid }
            return try await open(request, code: form["code"], confirmed: true)
        }
    }

    private func issue(_ request: Request) async throws -> Response {
        let access = try await bearer.authenticate(request, session: .alive, target: .init(method: "POST", url: issuer + "/session_code"))
        guard let app = apps[access.clientID] else { throw RelayError.invalidToken("the token's app is no longer registered") }
        // The body is optional; when there is one, it is a form that can be read whole.
        var form: FormParameters?
        if request.headers[.contentType] != nil {
            guard let read = try await FormParameters.body(of: request, limit: 16 * 1024) else {
                throw RelayError.invalidRequest("the body must be an application/x-www-form-urlencoded form")
            }
            if let repeated = read.firstRepeatedName { throw RelayError.invalidRequest("the parameter '\(repeated)' is given more than once") }
            form = read
        }
        if access.jkt == nil {
            guard let refresh = form?["refresh_token"] else {
                throw RelayError.invalidRequest("a Bearer access token alone opens no web session: send the session's refresh_token beside it (or use DPoP)")
            }
            guard try await isLiveRefreshToken(refresh, of: access.sid) else {
                throw RelayError.invalidGrant("the refresh_token is not this session's live one", .sessionEnded)
            }
        }
        let target = try target(form?["target"], app: app)
        let code = RelayStore.newToken(for: access.sid)
        try await sessions.saveSessionCode(code, .init(sid: access.sid, clientID: app.clientID, target: target))
        return RelayResponse.json(
            .ok,
            .object([
                "session_code": .string(code), "expires_in": .number(Double(RelayStore.sessionCodeLifetime.components.seconds)),
                "session_uri": .string(FormParameters.url(issuer + "/session", adding: [("code", code)])), "target": .string(target),
            ]))
    }

    /// Whether `token` is session `sid`'s refresh token: the live generation, or the one before it
    /// (an app that lost a rotation's answer), or a session's token from before derived tokens.
    private func isLiveRefreshToken(_ token: String, of sid: String) async throws -> Bool {
        guard let (named, generation) = SessionTokens.parseRefresh(token) else {
            return try await sessions.earlierVersionRefreshRecord(token)?.sid == sid
        }
        guard named == sid, let session = try await sessions.session(sid), generation <= session.span.generation, generation + 1 >= session.span.generation,
            let secret = await vault.openIdentityAfterSync(session.sealedIdentity)?.tokenSecret
        else { return false }
        return SessionTokens.isRefreshToken(token, sid: sid, generation: generation, secret: secret)
    }

    /// The requested target, exactly as configured; without one, the app's first.
    private func target(_ requested: String?, app: AppSettings) throws -> String {
        let allowed = app.webTargets.isEmpty ? developmentTarget.map { [$0] } ?? [] : app.webTargets
        guard let first = allowed.first else { throw RelayError(.invalidTarget, "this app has no web_targets (apps.\(app.clientID).web_targets)") }
        guard let requested else { return first }
        guard allowed.contains(requested) else { throw RelayError(.invalidTarget, "the target is not one of the app's web_targets") }
        return requested
    }

    static let invalid = RelayError(.invalidSessionCode, "This link has expired or was already used. Go back to the app and open the page again.", page: .sessionCodeInvalid)

    private func open(_ request: Request, code: String?, confirmed: Bool) async throws -> Response {
        guard !SecFetchSite.isFromElsewhere(request) else {
            throw RelayError(.invalidSessionCode, "This link was opened from another site. Open the page from the app instead.", page: .sessionCodeCrossSite)
        }
        guard let code, code.utf8.count <= 128, let sid = RelayStore.sessionID(in: code) else { throw Self.invalid }
        // The session first: an ended one opens nothing, and it bounds the cookie's lifetime.
        guard let session = try await sessions.session(sid) else { throw Self.invalid }
        let remaining = Int(session.span.expiresAt - sessions.clock.now)
        guard remaining > 1 else { throw Self.invalid }
        if !confirmed, let signedIn = try await otherPerson(in: request, than: session) {
            return confirmationPage(code: code, signedIn: signedIn, incoming: session)
        }
        let cookie = RelayStore.newToken(for: sid)
        guard let record = try await sessions.openWebSession(code: code, cookie: cookie, ttl: .seconds(remaining)), record.sid == sid else { throw Self.invalid }
        // The cookie this browser had is replaced: its web session closes too, or it would keep
        // working for whoever kept a copy (a shared computer). Clean-up after the commit.
        if let previous = webSessions.cookieValue(in: request), previous != cookie, previous.utf8.count <= 128,
            RelayStore.sessionID(in: previous) != nil
        {
            try? await sessions.closeWebSession(previous)
        }
        var response = Response(status: .seeOther, headers: [.location: record.target, .cacheControl: "no-store", .referrerPolicy: "no-referrer"])
        response.setCookie(webSessions.cookie(cookie, maxAge: remaining))
        return response
    }

    /// The live web session this browser already has, when it is another person's.
    private func otherPerson(in request: Request, than incoming: SessionRecord) async throws -> SessionRecord? {
        guard let cookie = webSessions.cookieValue(in: request), cookie.utf8.count <= 128,
            let current = RelayStore.sessionID(in: cookie), try await sessions.webSessionIsOpen(cookie),
            let session = try await sessions.session(current)
        else { return nil }
        return session.subject == incoming.subject && session.providerID == incoming.providerID ? nil : session
    }

    /// Who is signed in, and who the link would sign in instead; continuing takes the code, once.
    private func confirmationPage(code: String, signedIn: SessionRecord, incoming: SessionRecord) -> Response {
        let strings = PageContext.now.strings
        func name(_ session: SessionRecord) -> String {
            let claims = vault.open(SessionIdentity.self, session.sealedIdentity)?.claims ?? [:]
            let full = [claims["given_name"]?.stringValue, claims["family_name"]?.stringValue].compactMap { $0 }.joined(separator: " ")
            return HTMLText.escape(full.isEmpty ? claims["email"]?.stringValue ?? strings[.someoneElse] : full)
        }
        return RelayResponse.html(
            .ok, title: strings[.switchTitle],
            body: """
                <h1>\(strings[.switchTitle])</h1>
                <p>\(strings.format(.switchSignedInAs, #"<strong id="signed-in-as">\#(name(signedIn))</strong>"#))
                \(strings.format(.switchLinkSignsIn, #"<strong id="link-signs-in">\#(name(incoming))</strong>"#))</p>
                <p>\(strings[.switchIgnore])</p>
                <form method="post" action="/session"><input type="hidden" name="code" value="\(HTMLText.escape(code))">
                <button id="session-switch">\(strings.format(.switchContinue, name(incoming)))</button></form>
                """)
    }
}
