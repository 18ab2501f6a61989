import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisOIDC
import RelaisServer
import RelaisStore
import RelaisHTTPClient

/// Logout. In the browser: `GET /logout?client_id&post_logout_redirect_uri&state[&id_token_hint]`
/// ends the Relais session named by the hint, sends the browser through the provider's end-session
/// endpoint (with the provider's own id_token as hint), then back to the app. From an API:
/// `POST /logout` with a Bearer access token or a `refresh_token` ends the session, 204.
struct LogoutRoutes {
    let relay: Relay

    struct LogoutTransaction: Codable {
        var redirectURI: String
        var state: String?
    }

    func register(on router: Router<RelaisRequestContext>) {
        router.get("/logout") { request, context in try await browserLogout(request, context: context) }
        router.get("/logout/callback") { request, context in try await providerReturned(request, context: context) }
        router.post("/logout") { request, context in try await apiLogout(request, context: context) }
    }

    private func browserLogout(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        guard let parameters = FormParameters.query(of: request), parameters.repeatedNames.isEmpty else {
            return Relay.page(.badRequest, code: "invalid_request", message: "The logout parameters cannot be read.")
        }
        guard let clientID = parameters["client_id"], let app = relay.apps[clientID] else {
            return Relay.page(.badRequest, code: "unknown_client", message: "No app is registered with this client_id.")
        }
        guard let target = parameters["post_logout_redirect_uri"], app.postLogoutRedirectURIs.contains(target) else {
            return Relay.page(.badRequest, code: "invalid_redirect_uri", message: "This post_logout_redirect_uri is not registered for the app.")
        }
        let back = FormParameters.url(target, adding: parameters["state"].map { [("state", $0)] } ?? [])
        guard let hint = parameters["id_token_hint"], let sid = sessionID(fromIDToken: hint, clientID: clientID) else {
            return Relay.redirect(back)  // no session named: nothing to end, back to the app
        }
        do {
            let session = try await relay.sessions.get(sid)
            try await relay.sessions.revoke(sid, reason: .logout)
            context.logger.info("session ended by logout", metadata: ["client_id": "\(clientID)"])
            guard let session, let provider = relay.providers[session.providerID],
                let identity = relay.vault.open(SessionIdentity.self, session.sealedIdentity)
            else { return Relay.redirect(back) }
            // The provider's session ends too, or the next sign-in would skip the login page.
            let state = SecureRandom.token(bits: 256)
            guard let endSession = await provider.endSessionURL(idTokenHint: identity.providerIDToken, state: state) else { return Relay.redirect(back) }
            try await relay.store.set(
                RelayKeys.logout(state), StoredJSON.encode(LogoutTransaction(redirectURI: target, state: parameters["state"])),
                ttl: relay.configuration.relay.transactionLifetime
            )
            return Relay.redirect(endSession)
        } catch is StoreError {
            return Relay.page(.serviceUnavailable, code: "temporarily_unavailable", message: "Relais cannot reach its store right now; try again shortly.")
        }
    }

    private func providerReturned(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        guard let state = FormParameters.query(of: request)?["state"], !state.isEmpty else {
            return Relay.page(.badRequest, code: "invalid_request", message: "The provider's answer carries no state.")
        }
        do {
            guard let transaction = StoredJSON.decode(LogoutTransaction.self, try await relay.store.getAndDelete(RelayKeys.logout(state))) else {
                return Relay.page(.badRequest, code: "transaction_expired", message: "This logout has expired or was already completed. You are signed out.")
            }
            return Relay.redirect(FormParameters.url(transaction.redirectURI, adding: transaction.state.map { [("state", $0)] } ?? []))
        } catch is StoreError {
            return Relay.page(.serviceUnavailable, code: "temporarily_unavailable", message: "Relais cannot reach its store right now.")
        }
    }

    private func apiLogout(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        var sid: String?
        do {
            if request.headers[.authorization] != nil {
                switch await AccessTokenCheck(relay: relay).verify(request, session: .none) {
                case .success(let access): sid = access.sid
                case .failure(let failure): return failure.response(requestID: context.requestID)
                }
            } else {
                guard let form = try await FormParameters.body(of: request, limit: 16 * 1024), let token = form["refresh_token"], let clientID = form["client_id"] else {
                    return Relay.oauthError(.badRequest, "invalid_request", "send a Bearer access token, or client_id and refresh_token", requestID: context.requestID)
                }
                sid = try await relay.sessionID(ofToken: token, clientID: clientID, hint: "refresh_token")
                if sid == nil { return Relay.oauthError(.badRequest, "invalid_grant", "the refresh token is unknown", requestID: context.requestID) }
            }
            if let sid { try await relay.sessions.revoke(sid, reason: .logout) }
            return Response(status: .noContent, headers: [.cacheControl: "no-store"])
        } catch is StoreError {
            return Relay.oauthError(.serviceUnavailable, "temporarily_unavailable", "Relais cannot reach its store right now; retry shortly", requestID: context.requestID)
        }
    }

    /// The session named by one of Relais' own id_tokens (expired ones too: logout comes late).
    private func sessionID(fromIDToken token: String, clientID: String) -> String? {
        guard let jws = try? JWS.parse(token), (try? jws.verify(with: relay.keys.signingKeys)) != nil else { return nil }
        var policy = ClaimsPolicy(issuer: relay.issuer, audience: clientID)
        policy.requireExpiration = false
        policy.leeway = .seconds(365 * 86400)
        return (try? policy.validate(jws))?.string("sid")
    }
}
