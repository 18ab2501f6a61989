import HTTPTypes
import Hummingbird
import RelaisClock
import RelaisConfig
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
    let trustedProxies: [IPNetwork]

    /// Registered outside the flows' middleware (``Relay/register(on:)``): the answer from memory
    /// is synchronous; the full path binds its events' origin and renders its refusals itself.
    func register(on router: some RouterMethods<RelaisRequestContext>) {
        for method in [HTTPRequest.Method.get, .post] {
            router.on("/userinfo", method: method) { request, context in
                if let body = bodyFromMemory(request) { return RelayResponse.json(.ok, serialized: body) }
                return try await EventOrigin.binding(request, context, trustedProxies: trustedProxies) {
                    do {
                        return RelayResponse.json(.ok, serialized: try await userinfo(request))
                    } catch {
                        return try RelayError.rendered(error, .bearer, context)
                    }
                }
            }
        }
    }

    /// The body when memory alone gives it: a Bearer token verified before, its session known
    /// live, no query, and this token's body rendered before. nil means "take the full path",
    /// never "refused": every refusal is the full path's to word.
    private func bodyFromMemory(_ request: Request) -> [UInt8]? {
        guard request.uri.query.map(\.isEmpty) ?? true, !Self.hasBody(request.headers), let access = bearer.authenticateFromMemory(request, session: .alive),
            access.scopes.contains("openid"), access.facts.audiences.contains(bearer.issuer)
        else { return nil }
        return bodies.get(Self.bodyKey(access), now: sessions.clock.now)
    }

    /// Whether the request says it has a body: bytes announced, or chunks (a body-less POST may
    /// still name a Content-Type, with a length of 0).
    static func hasBody(_ headers: HTTPFields) -> Bool {
        headers[.transferEncoding] != nil || (headers[.contentLength].map { $0 != "0" } ?? false)
    }

    /// The query's parameters and a POST's form fields together, each name once. The token itself
    /// comes only in the Authorization header (RFC 6750 §2.2's form field is not supported).
    private func parameters(_ request: Request, refuse: (RelayError) -> RelayError) async throws -> FormParameters {
        guard let query = FormParameters.query(of: request) else { throw refuse(.invalidRequest("the /userinfo query (acr, max_age) cannot be read")) }
        var pairs = query.pairs
        if request.method == .post, Self.hasBody(request.headers) {
            guard let form = try await FormParameters.body(of: request, limit: 4096) else {
                throw refuse(.invalidRequest("a POST /userinfo body must be an application/x-www-form-urlencoded form (acr, max_age)"))
            }
            pairs += form.pairs
        }
        let all = pairs.count == query.pairs.count ? query : FormParameters(encoded: FormParameters.encode(pairs.map { ($0.name, $0.value) }))
        guard let all else { throw refuse(.invalidRequest("the /userinfo parameters cannot be read")) }
        if let repeated = all.firstRepeatedName {
            throw refuse(.invalidRequest("/userinfo has the parameter '\(ForwardAuthQuery.printable(repeated))' more than once"))
        }
        return all
    }

    private static func bodyKey(_ access: BearerAuthenticator.AccessToken) -> String {
        [access.sid, access.clientID, access.subject, access.facts.scope].joined(separator: "\u{0}")
    }

    private func userinfo(_ request: Request) async throws -> [UInt8] {
        let access = try await bearer.authenticate(
            request, session: .alive, target: .init(method: request.method.rawValue, url: bearer.issuer + request.uri.path)
        )
        // RFC 9449 §7.1: a bound token's refusals challenge with the DPoP scheme.
        func refuse(_ error: RelayError) -> RelayError {
            var error = error
            error.challengesDPoP = error.challengesDPoP || access.jkt != nil
            return error
        }
        guard access.scopes.contains("openid") else { throw refuse(.insufficientScope("the token lacks the openid scope")) }
        guard access.facts.audiences.contains(bearer.issuer) else { throw refuse(.invalidToken("the access token is not for Relais' /userinfo (aud)")) }
        // `acr` and `max_age`, in the query or a POST's form: an app may ask that the identity comes
        // from a strong enough, recent enough sign-in. Fail closed: parameters that cannot be read,
        // or name anything else, must not drop their requirements.
        let query = try await parameters(request, refuse: refuse)
        for pair in query.pairs {
            guard pair.name == "acr" || pair.name == "max_age" else {
                throw refuse(.invalidRequest("/userinfo has no parameter '\(ForwardAuthQuery.printable(pair.name))' (it knows acr, max_age)"))
            }
            if let problem = ForwardAuthQuery.stepUpProblem(pair.name, pair.value) { throw refuse(.invalidRequest(problem)) }
        }
        if let requirement = try StepUpRequirement(query) {
            try requirement.check(
                acr: access.acr, acrOrder: access.facts.providerID.flatMap { acrOrders[$0] } ?? [], authTime: access.facts.authTime,
                now: sessions.clock.now, dpop: access.jkt != nil
            )
        }
        let key = Self.bodyKey(access)
        let now = sessions.clock.now
        if let body = bodies.get(key, now: now) { return body }
        guard let session = try await sessions.session(access.sid), session.subject == access.subject, session.clientID == access.clientID,
            let identity = await vault.openIdentityAfterSync(session.sealedIdentity)
        else { throw refuse(.invalidToken("the session has ended")) }
        var claims = TokenMinter.grantedClaims(identity, scopes: access.scopes)
        claims["sub"] = .string(access.subject)
        let body = JSONValue.object(claims).serialized()
        bodies.put(key, body, bytes: body.count + key.utf8.count + 64, expiresAt: session.span.expiresAt, now: now)
        return body
    }
}
