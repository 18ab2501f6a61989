import FoundationEssentials
public import Hummingbird
public import Logging
import NIOCore
public import RelaisClock
public import RelaisConfig
import RelaisCrypto
public import RelaisHTTPClient
public import RelaisJOSE
public import RelaisServer
public import RelaisStore

/// A FranceConnect-compatible OpenID Provider for development and tests: the v2 protocol (and v1,
/// FranceConnect+ on demand), test identities on a login page, and failures injected on request.
///
/// Routes live in one file per endpoint (`AuthorizeRoutes`, `TokenRoute`, ...); this type holds
/// what they share. All state is in the store, so a provider on Redis survives its own restart.
public struct DevProvider: Sendable {
    public let configuration: DevProviderConfiguration
    /// `{public_base_url}/api/v2` (v1: `/api/v1`).
    public let issuer: String
    let store: any KeyValueStore
    let keys: SigningKeys
    let tokens: TokenFactory
    let faults: FaultBook
    let validator: AuthorizationValidator
    let clients: [String: DevProviderConfiguration.Client]
    let identities: [String: TestIdentity]
    let pairwiseSalt: String
    let clientKeys: ClientKeys
    let logger: Logger
    /// Token times and lifetimes; tests share a manual clock with the relay.
    let clock: any RelaisClock

    static let sessionCookie = "devprovider_session"
    static let interactionLifetime: Duration = .seconds(600)

    public static func make(
        configuration: DevProviderConfiguration,
        store: any KeyValueStore,
        httpClient: HTTPClient,
        logger: Logger,
        clock: any RelaisClock = SystemClock(),
        generateKey: @escaping KeyGenerator = JWK.freshKey
    ) async throws -> DevProvider {
        let keys = try await SigningKeys.load(keyFile: configuration.provider.signingKeyFile, store: store, generate: generateKey)
        var salt = configuration.provider.pairwiseSalt
        if salt == nil {
            // Kept in the store so pairwise subjects stay stable across restarts (on Redis).
            _ = try await store.setIfAbsent(StoreKeys.pairwiseSalt, Array(SecureRandom.token(bits: 256).utf8), ttl: .seconds(10 * 365 * 86400))
            salt = try await store.get(StoreKeys.pairwiseSalt).map { String(decoding: $0, as: UTF8.self) }
        }
        guard let salt else { throw DevProviderError.startup("cannot establish the pairwise salt") }
        let mode = configuration.provider.mode
        let issuer = configuration.server.publicBaseURL + (mode == .v1 ? "/api/v1" : "/api/v2")
        let clients = Dictionary(configuration.clients.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var configuredFaults: [String: [Fault]] = [:]
        for client in configuration.clients {
            configuredFaults[client.id] = try client.faults.map { text in
                switch Fault.parse(text) {
                case .success(let fault): return fault
                case .failure(let error): throw DevProviderError.startup("clients.\(client.id).faults: \(error)")
                }
            }
        }
        return DevProvider(
            configuration: configuration,
            issuer: issuer,
            store: store,
            keys: keys,
            tokens: TokenFactory(issuer: issuer, mode: mode, keys: keys, idTokenLifetime: configuration.provider.idTokenLifetime),
            faults: FaultBook(store: store, configured: configuredFaults),
            validator: AuthorizationValidator(mode: mode, clients: clients, identityProviders: Set(configuration.identities.compactMap { $0.claims["idp_id"] })),
            clients: clients,
            identities: Dictionary(configuration.identities.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }),
            pairwiseSalt: salt,
            clientKeys: ClientKeys(clients: configuration.clients, httpClient: httpClient, clock: clock),
            logger: logger,
            clock: clock
        )
    }

    /// The path prefix of every protocol endpoint.
    var prefix: String { configuration.provider.mode == .v1 ? "/api/v1" : "/api/v2" }

    public func register(on router: Router<RelaisRequestContext>) {
        AuthorizeRoutes(provider: self).register(on: router)
        TokenRoute(provider: self).register(on: router)
        UserinfoRoute(provider: self).register(on: router)
        LogoutRoute(provider: self).register(on: router)
        if configuration.provider.mode != .v1 { DiscoveryRoutes(provider: self).register(on: router) }
        if configuration.provider.testAPI { TestAPIRoutes(provider: self).register(on: router) }
    }

    /// FranceConnect's `sub` is pairwise: stable for one person and one sector, unrelated across
    /// sectors. ProConnect's is public: one UUID per agent, the same for every service.
    func subject(identityID: String, client: DevProviderConfiguration.Client) -> String {
        guard configuration.provider.mode == .proconnect else {
            return SHA256.hexHash("\(pairwiseSalt)\u{0}\(client.sectorIdentifier)\u{0}\(identityID)") + "v1"
        }
        let hex = Array(SHA256.hexHash("\(pairwiseSalt)\u{0}agent\u{0}\(identityID)").prefix(32))
        return [hex[0..<8], hex[8..<12], hex[12..<16], hex[16..<20], hex[20..<32]].map { String($0) }.joined(separator: "-")
    }

    func now() -> Int { clock.seconds }

    // MARK: - Responses

    static func html(_ status: HTTPResponse.Status, _ page: String, headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: page)))
    }

    static func redirect(to location: String, headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    static func json(_ status: HTTPResponse.Status, _ value: JSONValue, contentType: String = "application/json") -> Response {
        body(status, value.serialized(), contentType: contentType)
    }

    static func body(_ status: HTTPResponse.Status, _ bytes: [UInt8], contentType: String, headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = contentType
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A response that announces the whole body, sends its first half and drops the connection:
    /// what a provider crashing mid-response looks like to the client.
    static func truncated(_ bytes: [UInt8], contentType: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        headers[.cacheControl] = "no-store"
        let half = Array(bytes.prefix(bytes.count / 2))
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody(contentLength: bytes.count) { writer in
                try await writer.write(ByteBuffer(bytes: half))
                throw TruncatedOnPurpose()
            }
        )
    }

    struct TruncatedOnPurpose: Error {}

    /// An OAuth error as FranceConnect's token and userinfo endpoints send it.
    static func oauthError(_ status: HTTPResponse.Status, _ error: String, _ description: String, headers: HTTPFields = [:]) -> Response {
        body(status, JSONValue.object(["error": .string(error), "error_description": .string(description)]).serialized(), contentType: "application/json", headers: headers)
    }

    // MARK: - Faults

    /// Waits for a `delay` fault, then answers a `status` fault instead of the endpoint; nil lets the endpoint run.
    static func preempt(_ faults: [Fault], on target: Fault.Target) async -> Response? {
        if let delay = faults.first(.delay, on: target), let milliseconds = delay.value {
            try? await Task.sleep(for: .milliseconds(milliseconds))
        }
        if let status = faults.first(.status, on: target), let code = status.value {
            return oauthError(HTTPResponse.Status(code: code), "server_error", "injected failure: HTTP \(code)")
        }
        return nil
    }

    /// The endpoint's successful response, or what a `malformed` or `truncated` fault makes of it.
    static func answer(_ bytes: [UInt8], contentType: String, _ faults: [Fault], on target: Fault.Target) -> Response {
        if faults.has(.malformed, on: target) {
            return body(.ok, Array(#"{"error": "server_error", "error_description": <html>"#.utf8), contentType: contentType)
        }
        if faults.has(.truncated, on: target) { return truncated(bytes, contentType: contentType) }
        return body(.ok, bytes, contentType: contentType)
    }

    /// FranceConnect+ encrypts to the client's key (nil in the other modes). Without that key it
    /// cannot answer at all: it never falls back to sending tokens in clear.
    func encryptionKey(for client: DevProviderConfiguration.Client) async throws(EncryptionKeyUnavailable) -> JWK? {
        guard configuration.provider.mode == .fcplus else { return nil }
        do {
            return try await clientKeys.encryptionKey(client: client.id, algorithm: client.encryptionAlgorithm)
        } catch {
            logger.warning("client encryption key unavailable", metadata: ["client_id": "\(client.id)", "error": "\(error)"])
            throw EncryptionKeyUnavailable()
        }
    }

    struct EncryptionKeyUnavailable: Error {
        var response: Response {
            DevProvider.oauthError(.internalServerError, "server_error", "the client's encryption key is unavailable (jwks_uri unreachable or no suitable key)")
        }
    }

    func cookieSessionID(_ request: Request) -> String? {
        request.cookies[Self.sessionCookie]?.value
    }
}
