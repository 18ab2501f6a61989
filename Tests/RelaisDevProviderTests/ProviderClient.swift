import Foundation
import RelaisClock
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

/// Plays both the browser and the relying party against a development provider over real HTTP:
/// redirects are not followed, so each hop can be checked, and the provider's session cookie is kept.
final class ProviderClient: @unchecked Sendable {
    /// Served by this test process: the provider's own behaviour is under test, not its process.
    let provider: InProcessServer
    /// The provider's clock: tests move it instead of sleeping.
    let clock: ManualClock
    let http = HTTPClient(configuration: .init(maxConcurrentRequests: 4))
    let prefix: String
    var cookie: String?

    static let clients = """
          app:
            secret: app-secret-0123456789-0123456789-abcdef
            redirect_uris: [http://127.0.0.1:9/callback, "com.example.app:/oauth"]
            post_logout_redirect_uris: [http://127.0.0.1:9/logged-out]
          other:
            secret: other-secret-0123456789-0123456789-abcd
            redirect_uris: [http://127.0.0.1:9/other]
            sector_identifier: other-sector
          rs:
            secret: rs-secret-0123456789-0123456789-abcdefgh
            redirect_uris: [http://127.0.0.1:9/rs]
            id_token_signed_response_alg: RS256
        """
    static let secrets = [
        "app": "app-secret-0123456789-0123456789-abcdef", "other": "other-secret-0123456789-0123456789-abcd",
        "rs": "rs-secret-0123456789-0123456789-abcdefgh",
    ]
    static let redirects = ["app": "http://127.0.0.1:9/callback", "other": "http://127.0.0.1:9/other", "rs": "http://127.0.0.1:9/rs"]
    static let nonce = "nonce-0123456789abcdefghijklmnop"

    init(_ provider: InProcessServer, clock: ManualClock, prefix: String = "/api/v2") {
        self.provider = provider
        self.clock = clock
        self.prefix = prefix
    }

    deinit { provider.stop() }

    var issuer: String { provider.baseURL + prefix }

    static func launch(mode: String = "v2", clients: String = ProviderClient.clients, provider: String = "", store: String = "  kind: embedded") async throws -> ProviderClient {
        let clock = ManualClock()
        let server = try await InProcessServer.launch(.devProvider, clock: clock) { port in
            RelaisProcess.devProviderConfiguration(port: port, mode: mode, clients: clients, provider: provider, store: store)
        }
        return ProviderClient(server, clock: clock, prefix: mode == "v1" ? "/api/v1" : "/api/v2")
    }

    func authorizeParameters(client: String = "app", scope: String = "openid profile birth email", acr: String = "eidas1") -> [(String, String)] {
        [
            ("response_type", "code"), ("client_id", client), ("redirect_uri", Self.redirects[client] ?? ""), ("scope", scope),
            ("state", "state-\(client)-1234"), ("nonce", Self.nonce), ("acr_values", acr),
        ]
    }

    func get(_ url: String, headers: [(name: String, value: String)] = []) async throws -> HTTPClientResponse {
        var all = headers
        if let cookie { all.append((name: "Cookie", value: cookie)) }
        return remember(try await http.send(HTTPClientRequest(url: url, headers: all)))
    }

    func post(_ url: String, _ fields: [(String, String)], headers: [(name: String, value: String)] = []) async throws -> HTTPClientResponse {
        var all = headers
        if let cookie { all.append((name: "Cookie", value: cookie)) }
        return remember(try await http.send(.form(url: url, fields: fields, headers: all)))
    }

    private func remember(_ response: HTTPClientResponse) -> HTTPClientResponse {
        for header in response.headers where header.name.lowercased() == "set-cookie" {
            let pair = header.value.split(separator: ";").first.map(String.init) ?? ""
            cookie = pair.hasSuffix("=") ? nil : pair
        }
        return response
    }

    func authorize(_ parameters: [(String, String)]) async throws -> HTTPClientResponse {
        try await get(FormParameters.url(issuer + "/authorize", adding: parameters))
    }

    /// `/authorize`, then the login page; returns the page and its form action.
    func openLoginPage(_ parameters: [(String, String)]) async throws -> (page: String, action: String) {
        let redirect = try await authorize(parameters)
        #expect(redirect.status == 303, "authorize: \(redirect.status) \(redirect.bodyText)")
        let location = try #require(redirect.header("location"))
        try #require(location.hasPrefix(issuer + "/interaction/"), "authorize refused: \(location)")
        let page = try await get(location)
        #expect(page.status == 200)
        let html = page.bodyText
        let action = try #require(html.firstMatch(of: /action="([^"]+)"/)?.1).replacingOccurrences(of: "&amp;", with: "&")
        return (html, provider.baseURL + action)
    }

    /// Signs in as `identity` and returns the callback's query parameters.
    func signIn(as identity: String = "angela", _ parameters: [(String, String)]? = nil, client: String = "app") async throws -> FormParameters {
        let login = try await openLoginPage(parameters ?? authorizeParameters(client: client))
        let callback = try await post(login.action, [("identity", identity)])
        #expect(callback.status == 303)
        return try Self.query(of: try #require(callback.header("location")))
    }

    func exchange(code: String, client: String = "app", redirectURI: String? = nil, secret: String? = nil) async throws -> HTTPClientResponse {
        try await post(
            issuer + "/token",
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI ?? Self.redirects[client] ?? ""),
                ("client_id", client), ("client_secret", secret ?? Self.secrets[client] ?? ""),
            ]
        )
    }

    /// A whole sign-in up to the token response.
    func tokens(as identity: String = "angela", client: String = "app", scope: String = "openid profile birth email", acr: String = "eidas1") async throws -> [String: JSONValue] {
        let callback = try await signIn(as: identity, authorizeParameters(client: client, scope: scope, acr: acr), client: client)
        let response = try await exchange(code: try #require(callback["code"]), client: client)
        #expect(response.status == 200, "token: \(response.bodyText)")
        return try #require(JSONValue.object(from: response.body))
    }

    func userinfo(_ accessToken: String) async throws -> HTTPClientResponse {
        try await get(issuer + "/userinfo", headers: [(name: "Authorization", value: "Bearer \(accessToken)")])
    }

    func jwks() async throws -> JWKSet {
        try JWKSet(json: try await get(issuer + "/jwks").body)
    }

    /// Verifies a signed token against the provider's published keys and the standard policy.
    func verify(_ token: String, audience: String = "app", nonce: String? = ProviderClient.nonce, accessToken: String? = nil) async throws -> VerifiedClaims {
        let jws = try JWS.parse(token)
        try jws.verify(with: try await jwks())
        var policy = ClaimsPolicy(issuer: issuer, audience: audience, now: { [clock] in clock.now })
        policy.nonce = nonce
        policy.accessToken = accessToken
        return try policy.validate(jws)
    }

    static func query(of url: String) throws -> FormParameters {
        let query = url.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        return try #require(FormParameters(encoded: query))
    }
}
