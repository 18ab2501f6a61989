import FoundationEssentials
import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisHTTPClient

/// `POST /token` for public clients: `authorization_code` with PKCE opens the session;
/// `refresh_token` rotates the refresh token on every use, with a grace window for a lost response
/// and one rotation across instances (a lock in the store).
struct TokenRoute {
    let relay: Relay

    /// How long a request waits for another instance that is rotating the same refresh token.
    static let rotationWait: Duration = .seconds(3)
    static let lockLifetime: Duration = .seconds(10)

    struct Failure: Error {
        var status: HTTPResponse.Status
        var error: String
        var description: String

        static func request(_ description: String) -> Failure { Failure(status: .badRequest, error: "invalid_request", description: description) }
        static func grant(_ description: String) -> Failure { Failure(status: .badRequest, error: "invalid_grant", description: description) }
        static let unavailable = Failure(status: .serviceUnavailable, error: "temporarily_unavailable", description: "Relais cannot reach its store right now; retry shortly")
    }

    func register(on router: Router<RelaisRequestContext>) {
        router.post("/token") { request, context in
            if let wait = await relay.limiter.exceeded(ip: relay.limiter.clientIP(request, context), logger: context.logger) {
                return RateLimiter.json(retryAfter: wait, requestID: context.requestID)
            }
            do {
                return try await token(request, context: context)
            } catch let failure as Failure {
                return Relay.oauthError(failure.status, failure.error, failure.description, requestID: context.requestID)
            } catch is StoreError {
                return Relay.oauthError(.serviceUnavailable, "temporarily_unavailable", Failure.unavailable.description, requestID: context.requestID)
            }
        }
    }

    private func token(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        guard let form = try await FormParameters.body(of: request, limit: 64 * 1024) else {
            throw Failure.request("the body must be application/x-www-form-urlencoded")
        }
        if let repeated = form.repeatedNames.first { throw Failure.request("the parameter '\(repeated)' is given more than once") }
        guard let grantType = form["grant_type"] else { throw Failure.request("grant_type is missing") }
        guard let clientID = form["client_id"], !clientID.isEmpty else { throw Failure.request("client_id is missing (apps are public clients)") }
        guard let app = relay.apps[clientID] else {
            throw Failure(status: .unauthorized, error: "invalid_client", description: "no app is registered with this client_id")
        }
        if let wait = await relay.limiter.exceeded(clientID: clientID, logger: context.logger) {
            return RateLimiter.json(retryAfter: wait, requestID: context.requestID)
        }
        switch grantType {
        case "authorization_code": return try await exchange(form, app: app, context: context)
        case "refresh_token": return try await refresh(form, app: app, context: context)
        default: throw Failure(status: .badRequest, error: "unsupported_grant_type", description: "grant_type must be authorization_code or refresh_token")
        }
    }

    // MARK: - authorization_code

    private func exchange(_ form: FormParameters, app: AppSettings, context: RelaisRequestContext) async throws -> Response {
        guard let code = form["code"], !code.isEmpty else { throw Failure.request("code is missing") }
        guard let redirectURI = form["redirect_uri"], !redirectURI.isEmpty else { throw Failure.request("redirect_uri is missing") }
        guard let verifier = form["code_verifier"], !verifier.isEmpty else { throw Failure.request("code_verifier is missing (PKCE)") }
        let store = relay.store
        guard let record = StoredJSON.decode(RelayCode.self, try await store.getAndDelete(RelayKeys.code(code))) else {
            // A code used twice is a stolen or replayed code: the session it opened ends (RFC 6749 §4.1.2).
            if let sid = try await store.get(RelayKeys.usedCode(code)).map({ String(decoding: $0, as: UTF8.self) }) {
                try await relay.sessions.revoke(sid, reason: .codeReplay)
                RelayMetrics.securityEvent(.codeReplay)
                context.logger.warning("authorization code replayed; session revoked", metadata: ["client_id": "\(app.clientID)"])
                throw Failure.grant("the code was already used; the session it opened is revoked")
            }
            throw Failure.grant("the code is unknown or expired")
        }
        guard record.app.clientID == app.clientID else { throw Failure.grant("the code was issued to another client") }
        guard record.app.redirectURI == redirectURI else { throw Failure.grant("redirect_uri differs from the authorization request") }
        guard PKCE.verify(verifier, against: record.app.codeChallenge) else { throw Failure.grant("code_verifier does not match the code_challenge") }
        guard let identity = relay.vault.open(SessionIdentity.self, record.sealedIdentity) else {
            throw Failure(status: .internalServerError, error: "server_error", description: "the sign-in cannot be opened (session key missing)")
        }
        let now = SessionLedger.now()
        let session = SessionRecord(
            clientID: app.clientID, subject: record.subject, providerID: record.app.providerID, scopes: record.app.scopes, acr: record.acr,
            createdAt: now, expiresAt: now + Double(relay.configuration.relay.sessionLifetime.components.seconds), sealedIdentity: record.sealedIdentity
        )
        let sid = try await relay.sessions.open(session, providerSessionID: record.providerSessionID)
        do {
            try await store.set(RelayKeys.usedCode(code), Array(sid.utf8), ttl: relay.configuration.relay.codeLifetime * 2)
            let response = try await issue(sid: sid, session: session, identity: identity, app: app, nonce: record.app.nonce)
            RelayMetrics.sessionOpened(client: app.clientID)
            context.logger.info("session opened", metadata: ["client_id": "\(app.clientID)", "provider": "\(session.providerID)"])
            return Relay.json(.ok, response)
        } catch {
            // No half-open session: without its refresh token nobody could use or end it.
            try? await relay.sessions.revoke(sid, reason: .aborted)
            throw error
        }
    }

    /// Mints the token response and stores its refresh token.
    /// `scopes` narrows the tokens below the session's (RFC 6749 §6); the session keeps its own.
    private func issue(sid: String, session: SessionRecord, identity: SessionIdentity, app: AppSettings, nonce: String?, scopes: [String]? = nil) async throws -> JSONValue {
        var granted = session
        if let scopes { granted.scopes = scopes }
        let minted = try relay.minter.mint(sid: sid, session: granted, identity: identity, app: app, nonce: nonce)
        let refreshToken = SecureRandom.token(bits: 256)
        let ttl = relay.sessions.ttl(for: session) ?? .seconds(1)
        try await relay.store.set(RelayKeys.refreshToken(refreshToken), StoredJSON.encode(RefreshRecord(sid: sid, clientID: app.clientID)), ttl: ttl)
        return .object([
            "access_token": .string(minted.accessToken), "token_type": .string("Bearer"), "expires_in": .number(Double(minted.expiresIn)),
            "refresh_token": .string(refreshToken), "id_token": .string(minted.idToken), "scope": .string(granted.scopes.joined(separator: " ")),
        ])
    }

    // MARK: - refresh_token

    private func refresh(_ form: FormParameters, app: AppSettings, context: RelaisRequestContext) async throws -> Response {
        guard let token = form["refresh_token"], !token.isEmpty else { throw Failure.request("refresh_token is missing") }
        // RFC 6749 §6: a refresh may repeat or narrow the granted scopes, never widen them.
        let requestedScopes = form["scope"].map { $0.split(separator: " ").map(String.init) }
        let store = relay.store
        let lockKey = RelayKeys.refreshLock(token)
        let owner = Array(SecureRandom.token(bits: 96).utf8)
        let deadline = ContinuousClock.now + Self.rotationWait
        // One rotation per token across every instance: the lock holder rotates, the others wait
        // for its result and answer from the grace cache.
        while !(try await store.setIfAbsent(lockKey, owner, ttl: Self.lockLifetime)) {
            if let record = StoredJSON.decode(RefreshRecord.self, try await store.get(RelayKeys.refreshToken(token))), record.rotatedAt != nil {
                return try await answerRotated(record, token: token, app: app, context: context)
            }
            guard ContinuousClock.now < deadline else { throw Failure.unavailable }
            try await Task.sleep(for: .milliseconds(25))
        }
        let response: Response
        do {
            response = try await rotate(token, scopes: requestedScopes, app: app, context: context)
        } catch {
            _ = try? await store.deleteIfEqual(lockKey, owner)
            throw error
        }
        _ = try? await store.deleteIfEqual(lockKey, owner)
        return response
    }

    /// Rotates `token` while holding its lock.
    private func rotate(_ token: String, scopes: [String]?, app: AppSettings, context: RelaisRequestContext) async throws -> Response {
        let store = relay.store
        guard let record = StoredJSON.decode(RefreshRecord.self, try await store.get(RelayKeys.refreshToken(token))) else {
            throw Failure.grant("the refresh token is unknown or expired")
        }
        guard record.clientID == app.clientID else { throw Failure.grant("the refresh token was issued to another client") }
        if record.rotatedAt != nil { return try await answerRotated(record, token: token, app: app, context: context) }
        guard let session = try await relay.sessions.get(record.sid), session.clientID == app.clientID else {
            throw Failure.grant("the session has ended")
        }
        guard let identity = relay.vault.open(SessionIdentity.self, session.sealedIdentity) else {
            throw Failure(status: .internalServerError, error: "server_error", description: "the session cannot be opened (session key missing)")
        }
        if let scopes, let wider = scopes.first(where: { !session.scopes.contains($0) }) {
            throw Failure(status: .badRequest, error: "invalid_scope", description: "scope '\(wider)' was not granted at sign-in")
        }
        let response = try await issue(sid: record.sid, session: session, identity: identity, app: app, nonce: nil, scopes: scopes)
        var rotated = record
        rotated.rotatedAt = SessionLedger.now()
        rotated.sealedSuccessor = try relay.vault.seal(json: response)
        try await store.set(RelayKeys.refreshToken(token), StoredJSON.encode(rotated), ttl: relay.sessions.ttl(for: session) ?? .seconds(1))
        try await relay.sessions.touch(record.sid, session)
        return Relay.json(.ok, response)
    }

    /// A refresh token that was already rotated: the same answer within the grace window (the app
    /// lost the first one), the end of the session after it (the token was stolen and replayed).
    private func answerRotated(_ record: RefreshRecord, token: String, app: AppSettings, context: RelaisRequestContext) async throws -> Response {
        guard record.clientID == app.clientID else { throw Failure.grant("the refresh token was issued to another client") }
        let age = SessionLedger.now() - (record.rotatedAt ?? 0)
        if age <= Double(relay.configuration.relay.refreshGrace.components.seconds), let sealed = record.sealedSuccessor,
            let response = relay.vault.open(json: sealed), try await relay.sessions.get(record.sid) != nil
        {
            return Relay.json(.ok, response)
        }
        try await relay.sessions.revoke(record.sid, reason: .refreshReuse)
        RelayMetrics.securityEvent(.refreshReuse)
        context.logger.warning("refresh token reused after rotation; session revoked", metadata: ["client_id": "\(app.clientID)"])
        throw Failure.grant("the refresh token was already used; the session is revoked")
    }
}
