import HTTPTypes
import Hummingbird
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// `/auth`: forward-auth for gateways (nginx `auth_request`, Traefik ForwardAuth, Envoy ext_authz);
/// its query, answers and headers are documented in docs/operations.md ("Forward-auth"). Every
/// method is answered alike because Envoy asks with the guarded request's. Under `/auth/…` the
/// query is the client's (Envoy's `path_prefix`), so it is ignored: a client could otherwise switch
/// the session check off with `?session=0`.
struct ForwardAuthRoute: RelayRoutes {
    let bearer: BearerAuthenticator
    let webSessions: WebSessionAuthenticator
    /// What a web session's app may open (its tokens' audiences).
    let apps: [String: AppSettings]
    let settings: ForwardAuthSettings
    /// Each provider's acr levels, lowest first: a token's level is compared on its provider's scale.
    let acrOrders: [String: [String]]
    /// Gateways whose `X-Forwarded-*` description of the guarded request is believed (DPoP proofs
    /// are checked against it).
    let trustedProxies: [IPNetwork]

    static let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete, .options]

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let names = [settings.subjectHeader, settings.clientHeader, settings.acrHeader, settings.scopeHeader, settings.sessionHeader, settings.attestedHeader].map {
            HTTPField.Name($0)!
        }
        let check = Check(
            bearer: bearer, webSessions: webSessions, apps: apps, checkSession: settings.checkSession, audiences: settings.audiences, names: names, acrOrders: acrOrders,
            trustedProxies: trustedProxies
        )
        for method in Self.methods {
            router.on("/auth", method: method) { request, context in
                // `/auth/` is `/auth/…` with an empty guarded path: its query is the client's too.
                guard !request.uri.path.hasSuffix("/") else { return try await check.answer(request, context: context, options: nil) }
                // Fail closed: a gateway query that cannot be read must not drop its requirements.
                guard let options = FormParameters.query(of: request), options.firstRepeatedName == nil else {
                    return RelayError.invalidRequest("the /auth query (scope, acr, aud, session) cannot be read or repeats a parameter")
                        .bearer(requestID: context.requestID)
                }
                if let problem = ForwardAuthQuery.problem(in: options) { return RelayError.invalidRequest(problem).bearer(requestID: context.requestID) }
                return try await check.answer(request, context: context, options: options)
            }
            router.on("/auth/**", method: method) { request, context in
                try await check.answer(request, context: context, options: nil)
            }
        }
    }

    /// A final class: one per relay, used by every request a gateway forwards.
    private final class Check: Sendable {
        let bearer: BearerAuthenticator
        let webSessions: WebSessionAuthenticator
        let apps: [String: AppSettings]
        let checkSession: Bool
        let audiences: [String]
        let names: [HTTPField.Name]
        let acrOrders: [String: [String]]
        let trustedProxies: [IPNetwork]

        init(
            bearer: BearerAuthenticator, webSessions: WebSessionAuthenticator, apps: [String: AppSettings], checkSession: Bool, audiences: [String], names: [HTTPField.Name],
            acrOrders: [String: [String]], trustedProxies: [IPNetwork]
        ) {
            (self.bearer, self.webSessions, self.apps, self.checkSession) = (bearer, webSessions, apps, checkSession)
            (self.audiences, self.names, self.acrOrders, self.trustedProxies) = (audiences, names, acrOrders, trustedProxies)
        }

        /// The answer from memory when it is there (a Bearer token verified before, its session
        /// known live): synchronous, so a gateway's repeated checks enter no async function and
        /// allocate no async frame. Otherwise the full check, which may ask the store.
        @inline(__always)
        func answer(_ request: Request, context: RelaisRequestContext, options: FormParameters?) async throws -> Response {
            if let response = answerFromMemory(request, context: context, options: options) { return response }
            return try await respond(to: request, context: context, options: options)
        }

        private func answerFromMemory(_ request: Request, context: RelaisRequestContext, options: FormParameters?) -> Response? {
            guard options?["via"].map({ $0 == "token" }) ?? true else { return nil }
            guard let access = bearer.authenticateFromMemory(request, session: sessionCheck(options)) else { return nil }
            do {
                return try decide(.token(access), options: options)
            } catch {
                return error.response(.bearer, requestID: context.requestID)
            }
        }

        /// `?session=0|1` from the gateway, else `forward_auth.check_session`.
        private func sessionCheck(_ options: FormParameters?) -> BearerAuthenticator.SessionCheck {
            options?["session"].map { $0 != "0" } ?? checkSession ? .alive : .none
        }

        /// The full check. Registered outside ``EventOriginMiddleware`` (see `Relay.register`), so a
        /// DPoP proof refused here is recorded with this request as its origin.
        private func respond(to request: Request, context: RelaisRequestContext, options: FormParameters?) async throws -> Response {
            try await EventOrigin.binding(request, context, trustedProxies: trustedProxies) {
                do {
                    return try decide(await principal(request, options: options, target: guardedRequest(request, context)), options: options)
                } catch {
                    return try RelayError.rendered(error, .bearer, context)
                }
            }
        }

        /// The request the gateway guards, as a trusted gateway describes it: a DPoP proof is for that
        /// request, not for `/auth` (RFC 9449 §7.1, forward-auth). nil from anyone else.
        private func guardedRequest(_ request: Request, _ context: RelaisRequestContext) -> BearerAuthenticator.DPoPTarget? {
            // No trusted gateway configured: the peer's address is not even formatted.
            guard !trustedProxies.isEmpty, let peer = context.peerAddress, trustedProxies.contains(where: { $0.contains(peer) }),
                let method = request.headers[.xForwardedMethod], let scheme = request.headers[.xForwardedProto],
                let host = request.headers[.xForwardedHost], let uri = request.headers[.xForwardedURI], uri.hasPrefix("/")
            else { return nil }
            return .init(method: method, url: scheme + "://" + host + uri)
        }

        /// Who the guarded request comes from, by its access token or its web session cookie.
        private func principal(_ request: Request, options: FormParameters?, target: BearerAuthenticator.DPoPTarget?) async throws -> Principal {
            let via = options?["via"] ?? "token"
            guard via == "token" || via == "cookie" || via == "both" else { throw RelayError.invalidRequest("via must be token, cookie or both") }
            if try via == "token" || (via == "both" && BearerAuthenticator.authorization(request) != nil) {
                return .token(try await bearer.authenticate(request, session: sessionCheck(options), target: target))
            }
            let (sid, session) = try await webSessions.authenticate(request)
            guard let app = apps[session.clientID] else { throw RelayError.invalidToken("the web session's app is no longer registered") }
            return Principal(sid: sid, session: session, audiences: TokenMinter.audiences(of: app, scopes: session.scopes, issuer: bearer.issuer))
        }

        /// What the gateway asked of `access` (audience, scopes, attestation, step-up), and the 200.
        /// A refusal of a DPoP-bound token challenges with the DPoP scheme (RFC 9449 §7.1).
        private func decide(_ access: Principal, options: FormParameters?) throws(RelayError) -> Response {
            do {
                return try check(access, options: options)
            } catch {
                var refusal = error
                refusal.challengesDPoP = refusal.challengesDPoP || access.facts.jkt != nil
                throw refusal
            }
        }

        private func check(_ access: Principal, options: FormParameters?) throws(RelayError) -> Response {
            let facts = access.facts
            // A token minted for one API must not open another (RFC 9068 §4).
            let wanted = options?["aud"].map { $0.split(separator: " ").map(String.init) } ?? audiences
            if !wanted.isEmpty && !facts.audiences.contains(where: wanted.contains) {
                throw .invalidToken("the access token is not for this API (aud)")
            }
            if let required = options?["scope"]?.split(separator: " ").map(String.init), let missing = required.first(where: { !access.scopes.contains($0) }) {
                throw .insufficientScope("the token lacks the scope '\(missing)'")
            }
            // `?attested=1`: only tokens of app instances that proved they are the genuine app.
            if options?["attested"] == "1", facts.attested == nil {
                throw RelayError(.attestationRequired, "the token was issued to an app instance that did not attest")
            }
            // RFC 9470: too low or too old a sign-in is a 401 that says what the next one needs.
            if let requirement = try StepUpRequirement(options) {
                try requirement.check(
                    acr: facts.acr, acrOrder: facts.providerID.flatMap { acrOrders[$0] } ?? [], authTime: facts.authTime, now: bearer.clock.now,
                    dpop: facts.jkt != nil
                )
            }
            if case .token(let token) = access { return Response(status: .ok, headers: token.forwardHeaders(names: names) { identityHeaders(access) }) }
            return Response(status: .ok, headers: identityHeaders(access))
        }

        /// Every identity header on every 200, empty when there is no value: a gateway that copies
        /// Relais' headers then overwrites any the client forged.
        private func identityHeaders(_ access: Principal) -> HTTPFields {
            let facts = access.facts
            // Appended, not set: the names are distinct (checked by configuration), so no search.
            var headers = HTTPFields()
            headers.reserveCapacity(8)
            headers.append(HTTPField(name: names[0], value: access.subject))
            headers.append(HTTPField(name: names[1], value: access.clientID))
            headers.append(HTTPField(name: names[2], value: facts.acr ?? ""))
            headers.append(HTTPField(name: names[3], value: facts.scope))
            headers.append(HTTPField(name: names[4], value: access.sid))
            headers.append(HTTPField(name: names[5], value: facts.attested ?? ""))
            headers.append(HTTPField(name: .cacheControl, value: "no-store"))
            // Said here, so that the response does not add it to a token's kept headers each time.
            headers.append(HTTPField(name: .contentLength, value: "0"))
            return headers
        }
    }
}

/// What `/auth` needs of the person, whichever proved them: the verified token itself (shared
/// with the verified-token cache, nothing copied), or what a web session's record says.
private enum Principal {
    case token(BearerAuthenticator.AccessToken)
    case webSession(sid: String, session: SessionRecord, facts: BearerAuthenticator.AccessToken.Facts)

    init(sid: String, session: SessionRecord, audiences: [String]) {
        // No auth_time in a web session's record: any max_age fails.
        self = .webSession(
            sid: sid, session: session,
            facts: .init(
                acr: session.acr, providerID: session.providerID, authTime: nil, audiences: audiences, scope: session.scopes.joined(separator: " "), jkt: nil,
                attested: session.origin.attested?.platform
            )
        )
    }

    var subject: String {
        switch self {
        case .token(let access): access.subject
        case .webSession(_, let session, _): session.subject
        }
    }

    var clientID: String {
        switch self {
        case .token(let access): access.clientID
        case .webSession(_, let session, _): session.clientID
        }
    }

    var sid: String {
        switch self {
        case .token(let access): access.sid
        case .webSession(let sid, _, _): sid
        }
    }

    var scopes: [String] {
        switch self {
        case .token(let access): access.scopes
        case .webSession(_, let session, _): session.scopes
        }
    }

    var facts: BearerAuthenticator.AccessToken.Facts {
        switch self {
        case .token(let access): access.facts
        case .webSession(_, _, let facts): facts
        }
    }
}

extension HTTPField.Name {
    static let xForwardedMethod = Self("X-Forwarded-Method")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
    static let xForwardedHost = Self("X-Forwarded-Host")!
    static let xForwardedURI = Self("X-Forwarded-Uri")!
}
