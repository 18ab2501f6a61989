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
///   hash, bound to the session and the target) and the URL to open.
/// - `GET /session?code=…` in the webview: the code is consumed and the web session written in one
///   atomic step; the cookie is set and the browser goes to the target. Any refusal is an HTML page
///   that never redirects.
struct SessionCodeRoutes: RelayRoutes {
    let issuer: String
    let apps: [String: AppSettings]
    let bearer: BearerAuthenticator
    let sessions: SessionStore
    let limiter: RateLimiter
    /// Development only: the target of an app with no `web_targets` (the demo's web page).
    let developmentTarget: String?

    func register(on router: Router<RelaisRequestContext>) {
        router.post("/session_code") { request, context in
            try await limiter.guarding(.bearer, request, context) { try await issue(request) }
        }
        router.get("/session") { request, context in
            try await limiter.guarding(.page, request, context) { try await open(request) }
        }
    }

    private func issue(_ request: Request) async throws -> Response {
        let access = try await bearer.authenticate(request, session: .alive, target: .init(method: "POST", url: issuer + "/session_code"))
        guard let app = apps[access.clientID] else { throw RelayError.invalidToken("the token's app is no longer registered") }
        // The body is optional; when there is one, it is a form that can be read whole.
        var requested: String?
        if request.headers[.contentType] != nil {
            guard let form = try await FormParameters.body(of: request, limit: 16 * 1024) else {
                throw RelayError.invalidRequest("the body must be an application/x-www-form-urlencoded form")
            }
            if let repeated = form.firstRepeatedName { throw RelayError.invalidRequest("the parameter '\(repeated)' is given more than once") }
            requested = form["target"]
        }
        let target = try target(requested, app: app)
        let code = SessionStore.newToken(for: access.sid)
        try await sessions.saveSessionCode(code, .init(sid: access.sid, clientID: app.clientID, target: target))
        return RelayResponse.json(.ok, .object([
            "session_code": .string(code), "expires_in": .number(Double(SessionStore.sessionCodeLifetime.components.seconds)),
            "session_uri": .string(FormParameters.url(issuer + "/session", adding: [("code", code)])), "target": .string(target),
        ]))
    }

    /// The requested target, exactly as configured; without one, the app's first.
    private func target(_ requested: String?, app: AppSettings) throws -> String {
        let allowed = app.webTargets.isEmpty ? developmentTarget.map { [$0] } ?? [] : app.webTargets
        guard let first = allowed.first else { throw RelayError(.invalidTarget, "this app has no web_targets (apps.\(app.clientID).web_targets)") }
        guard let requested else { return first }
        guard allowed.contains(requested) else { throw RelayError(.invalidTarget, "the target is not one of the app's web_targets") }
        return requested
    }

    private func open(_ request: Request) async throws -> Response {
        let invalid = RelayError(.invalidSessionCode, "This link has expired or was already used. Go back to the app and open the page again.")
        guard let query = FormParameters.query(of: request), query.firstRepeatedName == nil, let code = query["code"], code.utf8.count <= 128,
            let sid = SessionStore.sessionID(in: code)
        else { throw invalid }
        // The session first: an ended one opens nothing, and it bounds the cookie's lifetime.
        guard let session = try await sessions.session(sid) else { throw invalid }
        let remaining = Int(session.expiresAt - sessions.clock.now)
        guard remaining > 1 else { throw invalid }
        let cookie = SessionStore.newToken(for: sid)
        guard let record = try await sessions.openWebSession(code: code, cookie: cookie, ttl: .seconds(remaining)), record.sid == sid else { throw invalid }
        var response = Response(status: .seeOther, headers: [.location: record.target, .cacheControl: "no-store", .referrerPolicy: "no-referrer"])
        response.setCookie(WebSessionAuthenticator.cookie(cookie, maxAge: remaining))
        return response
    }
}

extension HTTPField.Name {
    static let referrerPolicy = Self("Referrer-Policy")!
}
