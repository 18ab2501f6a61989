import Hummingbird
import Logging
import RelaisConfig
import RelaisJOSE
import RelaisServer
import RelaisStore

/// `GET|POST /userinfo`: the identity claims stored at sign-in, filtered by the access token's
/// scopes. The token must verify and its session must still be live. Errors follow RFC 6750.
struct UserinfoRoute {
    let relay: Relay

    func register(on router: Router<RelaisRequestContext>) {
        router.get("/userinfo") { request, context in try await userinfo(request, context: context) }
        router.post("/userinfo") { request, context in try await userinfo(request, context: context) }
    }

    private func userinfo(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        // The session must be live on every call; its record is read only when this body was not
        // rendered before (see `Relay.userinfoBodies`).
        let access: AccessTokenCheck.Verified
        switch await AccessTokenCheck(relay: relay).verify(request, session: .alive) {
        case .success(let verified): access = verified
        case .failure(let failure): return failure.response(requestID: context.requestID)
        }
        guard access.scopes.contains("openid") else {
            return BearerFailure.insufficientScope("the token lacks the openid scope").response(requestID: context.requestID)
        }
        let key = [access.sid, access.clientID, access.subject, access.scopes.joined(separator: " ")].joined(separator: "\u{0}")
        let now = SessionLedger.now()
        if let body = relay.userinfoBodies.get(key, now: now) { return Relay.json(.ok, serialized: body) }
        let session: SessionRecord?
        do {
            session = try await relay.sessions.get(access.sid)
        } catch {
            return BearerFailure.unavailable.response(requestID: context.requestID)
        }
        guard let session, session.subject == access.subject, session.clientID == access.clientID,
            let identity = relay.vault.openIdentity(session.sealedIdentity)
        else {
            return BearerFailure.invalidToken("the session has ended").response(requestID: context.requestID)
        }
        var claims = RelayTokenMinter.grantedClaims(identity, scopes: access.scopes)
        claims["sub"] = .string(access.subject)
        let body = JSONValue.object(claims).serialized()
        relay.userinfoBodies.put(key, body, expiresAt: session.expiresAt, now: now)
        return Relay.json(.ok, serialized: body)
    }
}
