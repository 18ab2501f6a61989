import Hummingbird
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore

/// `POST /introspect` (RFC 7662) for resource servers, authenticated with HTTP Basic (or
/// `client_id`/`client_secret` in the form). An access token is active while it verifies and its
/// session lives, so a revoked session turns its tokens inactive before they expire. A refresh
/// token is never active here: it is the app's, and no resource server has a use for it.
struct IntrospectRoute: RelayRoutes {
    let bearer: BearerAuthenticator
    let sessions: SessionStore
    let resourceServers: [ResourceServerSettings]

    static let inactive = JSONValue.object(["active": .bool(false)])

    func register(on router: Router<RelaisRequestContext>) {
        router.post("/introspect") { request, context in
            try await RelayError.rendering(.json, context) { RelayResponse.json(.ok, try await introspect(request)) }
        }
    }

    private func introspect(_ request: Request) async throws -> JSONValue {
        guard let form = try await FormParameters.body(of: request, limit: 64 * 1024), form.firstRepeatedName == nil else {
            throw RelayError.invalidRequest("the body must be a form without repeated parameters")
        }
        guard let server = authenticate(request, form) else {
            throw RelayError(.invalidClient, "resource server authentication failed", headers: [.wwwAuthenticate: #"Basic realm="relais""#])
        }
        guard let token = form["token"], !token.isEmpty else { throw RelayError.invalidRequest("token is missing") }
        return try await introspectAccessToken(token, for: server) ?? Self.inactive
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
        guard let id, let secret, let server = resourceServers.first(where: { $0.id == id }), ConstantTime.equals(secret, server.secret) else { return nil }
        return server
    }

    private func introspectAccessToken(_ token: String, for server: ResourceServerSettings) async throws -> JSONValue? {
        // Not a Relais JWT at all: perhaps a refresh token.
        guard let jws = try? JWS.parse(token), jws.keyID != nil || bearer.keys.ring.signingKeys.keys.count == 1 else { return nil }
        guard let access = try? bearer.verify(token) else { return Self.inactive }
        let claims = access.claims
        if !server.audiences.isEmpty && Set(claims.audience).isDisjoint(with: server.audiences) { return Self.inactive }
        guard try await sessions.isLive(access.sid) else { return Self.inactive }
        // RFC 9449 §6.2: a bound token's `cnf.jkt` lets the API check the proof itself.
        var result: [String: JSONValue] = ["active": .bool(true), "token_type": .string(access.jkt == nil ? "Bearer" : "DPoP")]
        for name in ["sub", "client_id", "scope", "exp", "iat", "iss", "aud", "acr", "sid", "jti", "idp", "cnf", "attested"] { result[name] = claims[name] }
        return .object(result)
    }
}
