import Hummingbird
import RelaisClock
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// `GET|POST /userinfo`: the identity claims stored at sign-in, filtered by the access token's
/// scopes. The token must verify and its session must still be live. Errors follow RFC 6750.
struct UserinfoRoute: RelayRoutes {
    let bearer: BearerAuthenticator
    let sessions: RelayStore
    let vault: SessionVault
    /// Each provider's acr levels, lowest first, for `?acr=`.
    let acrOrders: [String: [String]]
    /// Rendered bodies by session, app, subject and scopes. A session record never changes once
    /// written, so its body is current for as long as the session is live, which is still checked
    /// on every call (one TTL lookup instead of reading, parsing and rendering the record).
    /// Bounded in bytes (`memory.userinfo_bodies`).
    let bodies: MemoryCache<String, [UInt8]>

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let api = router.surface(.bearer)
        api.get("/userinfo") { request, _ in RelayResponse.json(.ok, serialized: try await userinfo(request)) }
        api.post("/userinfo") { request, _ in RelayResponse.json(.ok, serialized: try await userinfo(request)) }
    }

    private func userinfo(_ request: Request) async throws -> [UInt8] {
        let access = try await bearer.authenticate(
            request, session: .alive, target: .init(method: request.method.rawValue, url: bearer.issuer + request.uri.path)
        )
        guard access.scopes.contains("openid") else { throw RelayError.insufficientScope("the token lacks the openid scope") }
        // `?acr=` and `?max_age=`: an app may ask that the identity comes from a strong enough, recent enough sign-in.
        // Fail closed: a query that cannot be read must not drop its requirements.
        guard let query = FormParameters.query(of: request), query.firstRepeatedName == nil else {
            throw RelayError.invalidRequest("the /userinfo query (acr, max_age) cannot be read or repeats a parameter")
        }
        if let requirement = try StepUpRequirement(query) {
            try requirement.check(
                acr: access.acr, acrOrder: access.facts.providerID.flatMap { acrOrders[$0] } ?? [], authTime: access.facts.authTime,
                now: sessions.clock.now, dpop: access.jkt != nil
            )
        }
        guard access.facts.audiences.contains(bearer.issuer) else { throw RelayError.invalidToken("the access token is not for Relais' /userinfo (aud)") }
        let key = [access.sid, access.clientID, access.subject, access.facts.scope].joined(separator: "\u{0}")
        let now = sessions.clock.now
        if let body = bodies.get(key, now: now) { return body }
        guard let session = try await sessions.session(access.sid), session.subject == access.subject, session.clientID == access.clientID,
            let identity = await vault.openIdentityAfterSync(session.sealedIdentity)
        else { throw RelayError.invalidToken("the session has ended") }
        var claims = TokenMinter.grantedClaims(identity, scopes: access.scopes)
        claims["sub"] = .string(access.subject)
        let body = JSONValue.object(claims).serialized()
        bodies.put(key, body, bytes: body.count + key.utf8.count + 64, expiresAt: session.span.expiresAt, now: now)
        return body
    }
}
