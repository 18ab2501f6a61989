public import Hummingbird
public import Logging
public import RelaisConfig
public import RelaisHTTPClient
public import RelaisServer
public import RelaisStore
import HTTPTypes
import NIOCore
import RelaisJOSE
import RelaisOIDC

/// The relay: an OAuth 2.0 authorization server for apps (RFC 6749, PKCE, RFC 8252) and a
/// confidential OpenID Connect client of the providers. One file per endpoint (`AuthorizeRoute`,
/// `CallbackRoute`, `TokenRoute`, `UserinfoRoute`, `MetadataRoutes`); this type holds what they share.
public final class Relay: Sendable {
    let configuration: RelaisConfiguration
    let store: any KeyValueStore
    let providers: [String: UpstreamProvider]
    let apps: [String: AppSettings]
    let keys: RelayKeyRing
    let vault: SessionVault
    let sessions: SessionLedger
    let minter: RelayTokenMinter
    let validator: AppAuthorizationValidator
    let limiter: RateLimiter
    /// Verified access tokens by their SHA-256, until `exp` (plus the leeway): a gateway presents the
    /// same token many times, and an ES256 verification costs more than the rest of the request.
    let verifiedTokens = MemoryCache<[UInt8], AccessTokenCheck.Verified>(capacity: 50_000)
    /// Rendered /userinfo bodies by session, app, subject and scopes. A session record never
    /// changes once written, so its body is current for as long as the session is live, which
    /// /userinfo still checks on every call (one TTL lookup instead of reading, parsing and
    /// rendering the record).
    let userinfoBodies = MemoryCache<String, [UInt8]>(capacity: 10_000)
    let logger: Logger

    /// Relais' issuer: its public base URL.
    public var issuer: String { configuration.server.publicBaseURL }
    var callbackURL: String { issuer + "/callback" }

    /// One instance per process, shared by every route (a class: requests do not copy its fields).
    public init(configuration: RelaisConfiguration, store: any KeyValueStore, httpClient: HTTPClient, logger: Logger) async throws {
        let keys = try await RelayKeyRing.load(configuration.keys, store: store)
        let apps = Dictionary(configuration.apps.map { ($0.clientID, $0) }, uniquingKeysWith: { first, _ in first })
        let providerSettings = Dictionary(configuration.providers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        self.configuration = configuration
        self.store = store
        providers = providerSettings.mapValues { UpstreamProvider(settings: $0, http: httpClient) }
        self.apps = apps
        self.keys = keys
        vault = SessionVault(keys: keys)
        sessions = SessionLedger(store: store, settings: configuration.relay)
        minter = RelayTokenMinter(issuer: configuration.server.publicBaseURL, keys: keys)
        validator = AppAuthorizationValidator(apps: apps, providers: providerSettings)
        limiter = RateLimiter(store: store, settings: configuration.rateLimit, trustedProxies: configuration.server.trustedProxies.compactMap(IPNetwork.init))
        self.logger = logger
    }

    public func register(on router: Router<RelaisRequestContext>) {
        AuthorizeRoute(relay: self).register(on: router)
        CallbackRoute(relay: self).register(on: router)
        TokenRoute(relay: self).register(on: router)
        UserinfoRoute(relay: self).register(on: router)
        IntrospectRoute(relay: self).register(on: router)
        RevokeRoute(relay: self).register(on: router)
        ForwardAuthRoute(relay: self).register(on: router)
        LogoutRoutes(relay: self).register(on: router)
        BackchannelLogoutRoute(relay: self).register(on: router)
        WellKnownRoutes(relay: self).register(on: router)
        MetadataRoutes(relay: self).register(on: router)
        if configuration.server.environment == .development { DemoAppRoutes(relay: self).register(on: router) }
    }

    // MARK: - Shared responses

    static func page(_ status: HTTPResponse.Status, code: String, message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        let html = """
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — \(HTMLText.escape(code))</title>
            <style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem}code{background:#eee;padding:.1rem .3rem}</style>
            </head><body>
            <h1>La connexion n'a pas pu aboutir</h1>
            <p id="error-message">\(HTMLText.escape(message))</p>
            <p>Code : <code id="error-code">\(HTMLText.escape(code))</code></p>
            <p>Fermez cette fenêtre et réessayez depuis l'application. / Close this window and try again from the app.</p>
            </body></html>
            """
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .found, headers: [.location: location, .cacheControl: "no-store"])
    }

    /// An OAuth error sent back to the app's redirect URI, with `iss` (RFC 9207).
    func errorRedirect(_ app: AppRequest, error: String, description: String) -> Response {
        var parameters = [("error", error), ("error_description", description)]
        if let state = app.state { parameters.append(("state", state)) }
        parameters.append(("iss", issuer))
        return Self.redirect(FormParameters.url(app.redirectURI, adding: parameters))
    }

    static func json(_ status: HTTPResponse.Status, _ value: JSONValue, headers extra: HTTPFields = [:]) -> Response {
        json(status, serialized: value.serialized(), headers: extra)
    }

    static func json(_ status: HTTPResponse.Status, serialized body: [UInt8], headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Pragma")!] = "no-cache"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// RFC 6749 §5.2 error body (plus the request id the rest of Relais uses).
    static func oauthError(_ status: HTTPResponse.Status, _ error: String, _ description: String, requestID: String, headers: HTTPFields = [:]) -> Response {
        json(status, .object(["error": .string(error), "error_description": .string(description), "request_id": .string(requestID)]), headers: headers)
    }
}
