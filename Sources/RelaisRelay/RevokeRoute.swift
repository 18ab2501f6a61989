import Hummingbird
import Logging
import RelaisConfig
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisHTTPClient

/// `POST /revoke` (RFC 7009) for apps: a refresh token (or an access token) ends its session, so
/// every token of that sign-in stops working. An unknown token is not an error (§2.2).
struct RevokeRoute {
    let relay: Relay

    func register(on router: Router<RelaisRequestContext>) {
        router.post("/revoke") { request, context in
            guard let form = try await FormParameters.body(of: request, limit: 64 * 1024), form.repeatedNames.isEmpty else {
                return Relay.oauthError(.badRequest, "invalid_request", "the body must be a form without repeated parameters", requestID: context.requestID)
            }
            guard let clientID = form["client_id"], relay.apps[clientID] != nil else {
                return Relay.oauthError(.unauthorized, "invalid_client", "no app is registered with this client_id", requestID: context.requestID)
            }
            guard let token = form["token"], !token.isEmpty else {
                return Relay.oauthError(.badRequest, "invalid_request", "token is missing", requestID: context.requestID)
            }
            do {
                if let sid = try await relay.sessionID(ofToken: token, clientID: clientID, hint: form["token_type_hint"]) {
                    try await relay.sessions.revoke(sid, reason: .revoked)
                    context.logger.info("session revoked by the app", metadata: ["client_id": "\(clientID)"])
                }
                return Response(status: .ok, headers: [.cacheControl: "no-store"])
            } catch is StoreError {
                return Relay.oauthError(.serviceUnavailable, "temporarily_unavailable", "Relais cannot reach its store right now; retry shortly", requestID: context.requestID)
            }
        }
    }
}

extension Relay {
    /// The session a refresh or access token of `clientID` belongs to; nil for anything else.
    func sessionID(ofToken token: String, clientID: String, hint: String?) async throws -> String? {
        if hint != "access_token", let record = StoredJSON.decode(RefreshRecord.self, try await store.get(RelayKeys.refreshToken(token))) {
            return record.clientID == clientID ? record.sid : nil
        }
        guard let jws = try? JWS.parse(token), (try? jws.verify(with: keys.signingKeys)) != nil else { return nil }
        var policy = ClaimsPolicy(issuer: issuer)
        policy.requireExpiration = false  // revoking an expired token still ends its session
        guard let claims = try? policy.validate(jws), claims.string("client_id") == clientID else { return nil }
        return claims.string("sid")
    }
}
