import Hummingbird
import Logging
import RelaisConfig
import RelaisHTTPClient
import RelaisServer

/// `POST /revoke` (RFC 7009) for apps: a refresh token (or an access token) ends its session, so
/// every token of that sign-in stops working. An unknown token is not an error (§2.2). A token of a
/// DPoP-bound session needs a proof by its key (RFC 9449 §5), as refreshing it does.
struct RevokeRoute: RelayRoutes {
    let apps: [String: AppSettings]
    let tokens: TokenSessions
    let dpop: DPoPGuard
    let issuer: String
    let events: SecurityEventLog

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.surface(.json).post("/revoke") { request, context in
            guard let form = try await FormParameters.body(of: request, limit: 64 * 1024), form.firstRepeatedName == nil else {
                throw RelayError.invalidRequest("the body must be a form without repeated parameters")
            }
            let client = try PublicClient(request, form)
            let clientID = client.id
            guard apps[clientID] != nil else { throw client.unknown }
            guard let token = form["token"], !token.isEmpty else { throw RelayError.invalidRequest("token is missing") }
            if let sid = try await tokens.session(ofToken: token, clientID: clientID, hint: form["token_type_hint"]) {
                if let key = try await tokens.sessions.session(sid)?.origin.dpopKey {
                    try await dpop.possession(request, thumbprint: key, url: issuer + "/revoke", client: clientID)
                }
                try await tokens.sessions.revoke(sid, reason: .revoked)
                context.logger.info("session revoked by the app", metadata: ["client_id": "\(clientID)"])
                events.record(.sessionRevoked, client: clientID, sid: sid)
            }
            return RelayResponse.done()
        }
    }
}
