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
    let sessions: RelayStore
    let resourceServers: [ResourceServerSettings]

    static let inactive = JSONValue.object(["active": .bool(false)]).serialized()

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.surface(.json).post("/introspect") { request, _ in RelayResponse.json(.ok, serialized: try await introspect(request)) }
    }

    private func introspect(_ request: Request) async throws -> [UInt8] {
        guard let form = try await FormParameters.body(of: request, limit: 64 * 1024), form.firstRepeatedName == nil else {
            throw RelayError.invalidRequest("the body must be a form without repeated parameters")
        }
        guard let server = authenticate(request, form) else {
            throw RelayError(.invalidClient, "resource server authentication failed", headers: [.wwwAuthenticate: #"Basic realm="relais""#])
        }
        guard let token = form["token"], !token.isEmpty else { throw RelayError.invalidRequest("token is missing") }
        return try await introspectAccessToken(token, for: server) ?? Self.inactive
    }

    /// RFC 7662 §2.1: the caller authenticates; secrets are compared in constant time. A Basic
    /// header that cannot be read fails, whatever the form holds (fail closed).
    private func authenticate(_ request: Request, _ form: FormParameters) -> ResourceServerSettings? {
        var id = form["client_id"], secret = form["client_secret"]
        if let header = request.headers[.authorization], Self.isBasic(header) {
            guard let basic = Self.basicCredentials(header) else { return nil }
            (id, secret) = basic
        }
        guard let id, let secret, let server = resourceServers.first(where: { $0.id == id }), ConstantTime.equals(secret, server.secret) else { return nil }
        return server
    }

    static func isBasic(_ header: String) -> Bool {
        header.utf8.count >= 6 && header.utf8.prefix(6).map { $0 | 0x20 }.elementsEqual("basic ".utf8)
    }

    /// `Basic base64(id:secret)`, each side form-encoded (RFC 6749 §2.3.1), read on the bytes.
    static func basicCredentials(_ header: String) -> (id: String, secret: String)? {
        guard isBasic(header), let decoded = Base64.decode(String(Substring(header.utf8.dropFirst(6)))),
            let text = String(validating: decoded, as: UTF8.self), let colon = text.utf8.firstIndex(of: UInt8(ascii: ":")),
            let id = FormParameters.decodeComponent(text[..<colon]),
            let secret = FormParameters.decodeComponent(text[text.utf8.index(after: colon)...])
        else { return nil }
        return (id, secret)
    }

    /// An access token's answer: its own introspection (serialised when it was first verified)
    /// while it verifies, is for this resource server and its session lives; inactive otherwise,
    /// refresh tokens and anything else included.
    private func introspectAccessToken(_ token: String, for server: ResourceServerSettings) async throws -> [UInt8]? {
        guard let access = try? bearer.verify(token) else { return nil }
        if !server.audiences.isEmpty && !access.facts.audiences.contains(where: server.audiences.contains) { return nil }
        if sessions.knownLive(access.sid) { return access.introspection }
        guard try await sessions.isLive(access.sid) else { return nil }
        return access.introspection
    }
}
