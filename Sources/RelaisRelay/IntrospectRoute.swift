import FoundationEssentials
import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisHTTPClient

/// `POST /introspect` (RFC 7662) for resource servers, authenticated with HTTP Basic (or
/// `client_id`/`client_secret` in the form). An access token is active while it verifies and its
/// session lives, so a revoked session turns its tokens inactive before they expire.
struct IntrospectRoute {
    let relay: Relay

    func register(on router: Router<RelaisRequestContext>) {
        router.post("/introspect") { request, context in
            guard let form = try await FormParameters.body(of: request, limit: 64 * 1024), form.repeatedNames.isEmpty else {
                return Relay.oauthError(.badRequest, "invalid_request", "the body must be a form without repeated parameters", requestID: context.requestID)
            }
            guard let server = authenticate(request, form) else {
                return Relay.oauthError(
                    .unauthorized, "invalid_client", "resource server authentication failed", requestID: context.requestID,
                    headers: [.wwwAuthenticate: #"Basic realm="relais""#]
                )
            }
            guard let token = form["token"], !token.isEmpty else {
                return Relay.oauthError(.badRequest, "invalid_request", "token is missing", requestID: context.requestID)
            }
            do {
                let hint = form["token_type_hint"]
                var result: JSONValue? = nil
                if hint != "refresh_token" { result = try await introspectAccessToken(token, for: server) }
                if result == nil { result = try await introspectRefreshToken(token, for: server) }
                return Relay.json(.ok, result ?? .object(["active": .bool(false)]))
            } catch is StoreError {
                return Relay.oauthError(.serviceUnavailable, "temporarily_unavailable", "Relais cannot reach its store right now; retry shortly", requestID: context.requestID)
            }
        }
    }

    /// RFC 7662 §2.1: the caller authenticates; secrets are compared in constant time.
    private func authenticate(_ request: Request, _ form: FormParameters) -> ResourceServerSettings? {
        var id = form["client_id"], secret = form["client_secret"]
        if let header = request.headers[.authorization], header.lowercased().hasPrefix("basic "),
            let decoded = Base64.decode(String(header.dropFirst(6))),
            let text = String(validating: decoded, as: UTF8.self), let colon = text.firstIndex(of: ":")
        {
            id = FormParameters(encoded: "i=" + text[..<colon])?["i"]
            secret = FormParameters(encoded: "s=" + text[text.index(after: colon)...])?["s"]
        }
        guard let id, let secret, let server = relay.configuration.resourceServers.first(where: { $0.id == id }),
            ConstantTime.equals(secret, server.secret)
        else { return nil }
        return server
    }

    private func introspectAccessToken(_ token: String, for server: ResourceServerSettings) async throws -> JSONValue? {
        // Not a Relais JWT at all: perhaps a refresh token.
        guard let jws = try? JWS.parse(token), jws.keyID != nil || relay.keys.signingKeys.keys.count == 1 else { return nil }
        guard case .success(let access) = AccessTokenCheck(relay: relay).verifyToken(token) else { return .object(["active": .bool(false)]) }
        let claims = access.claims
        if !server.audiences.isEmpty && Set(claims.audience).isDisjoint(with: server.audiences) { return .object(["active": .bool(false)]) }
        guard try await relay.sessions.isLive(access.sid) else { return .object(["active": .bool(false)]) }
        var result: [String: JSONValue] = ["active": .bool(true), "token_type": .string("Bearer")]
        for name in ["sub", "client_id", "scope", "exp", "iat", "iss", "aud", "acr", "sid", "jti", "idp"] { result[name] = claims[name] }
        return .object(result)
    }

    private func introspectRefreshToken(_ token: String, for server: ResourceServerSettings) async throws -> JSONValue? {
        guard let record = StoredJSON.decode(RefreshRecord.self, try await relay.store.get(RelayKeys.refreshToken(token))), record.rotatedAt == nil,
            let session = try await relay.sessions.get(record.sid), let app = relay.apps[record.clientID]
        else { return nil }
        if !server.audiences.isEmpty && Set(app.audiences).isDisjoint(with: server.audiences) { return .object(["active": .bool(false)]) }
        return .object([
            "active": .bool(true), "token_type": .string("refresh_token"), "sub": .string(session.subject), "client_id": .string(session.clientID),
            "scope": .string(session.scopes.joined(separator: " ")), "exp": .number(session.expiresAt.rounded(.down)), "iss": .string(relay.issuer),
        ])
    }
}
