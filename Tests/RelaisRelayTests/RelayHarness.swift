import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

/// A development provider and one or more Relais processes wired together, and an app that drives
/// them the way a mobile app and its webview do: PKCE, /authorize, the provider's login page, the
/// callback, /token. Redirects are followed by hand so every hop can be checked.
final class RelayHarness: @unchecked Sendable {
    let provider: any TestServer
    /// With `stepUpKey`: a FranceConnect+ provider (`fcplus`) that `fc` names as its step-up.
    var stepUpProvider: (any TestServer)?
    var relays: [any TestServer]
    /// Room for the whole test process's /metrics: in-process relays share one registry, whose
    /// series (per Redis server and provider host the suite ever started) pass 1 MiB in a full run.
    let http = HTTPClient(configuration: .init(maxResponseBytes: 64 << 20, maxConcurrentRequests: 8))
    /// The in-process provider's and relays' clock (and their embedded stores'): tests move it
    /// instead of sleeping.
    let clock: ManualClock
    /// The browser's cookie at the provider.
    var providerCookie: String?
    /// Where the relays append their security events.
    var eventsFile = ""

    /// The security events written so far, oldest first.
    func securityEvents() -> [[String: JSONValue]] {
        let text = (try? String(contentsOfFile: eventsFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { JSONValue.object(from: Array($0.utf8)) }
    }

    /// The raw event lines, to check that nothing secret appears in them.
    func securityEventText() -> String { (try? String(contentsOfFile: eventsFile, encoding: .utf8)) ?? "" }

    static let appRedirect = "http://127.0.0.1:7777/cb"
    static let providerSecret = "relay-test-secret-0123456789-0123456789"

    var relay: any TestServer { relays[0] }
    var issuer: String { relay.baseURL }
    var providerIssuer: String { provider.baseURL + (mode == "v1" ? "/api/v1" : "/api/v2") }
    let mode: String

    private init(provider: any TestServer, relays: [any TestServer], mode: String, clock: ManualClock) {
        self.clock = clock
        self.provider = provider
        self.relays = relays
        self.mode = mode
    }

    deinit {
        provider.stop()
        stepUpProvider?.stop()
        relays.forEach { $0.stop() }
    }

    /// `relayExtra` is appended to the relay's file (top-level sections); `providerExtra` goes in
    /// the provider's `providers.fc` entry; `store` is the relay's store section; `providerSettings`
    /// goes in the development provider's own `provider` section. `inProcess: false` runs the real
    /// binary instead, for what only a process shows (its log, its /metrics).
    static func launch(
        inProcess: Bool = true,
        mode: String = "v2",
        instances: Int = 1,
        store: String = "  kind: embedded",
        providerClient: String = "",
        providerExtra: String = "",
        relayExtra: String = "",
        relayEnvironment: [String: String] = [:],
        fcplusKey: JWK? = nil,
        stepUpKey: JWK? = nil,
        providerSettings: String = "",
        appScopes: String = "[openid, profile, birth, email]"
    ) async throws -> RelayHarness {
        let relayPorts = try (0..<instances).map { _ in try FreePort.find() }
        // One clock for the provider and the relays, as if they shared an NTP-synchronised host.
        let clock = ManualClock()
        // All instances share one public URL (the load balancer's): the first port stands for it.
        let publicURL = "http://127.0.0.1:\(relayPorts[0])"
        var client = """
              relais:
                secret: \(providerSecret)
                redirect_uris: [\(publicURL)/callback]
                post_logout_redirect_uris: [\(publicURL)/logout/callback]
            """
        if fcplusKey != nil {
            // As in production: the provider fetches Relais' published encryption keys.
            client += "\n    jwks_uri: \(publicURL)/jwks/provider.json"
        }
        client += providerClient.replacingOccurrences(of: "RELAY/", with: publicURL + "/")
        let provider: any TestServer
        if inProcess {
            provider = try await InProcessServer.launch(.devProvider, clock: clock) { port in
                RelaisProcess.devProviderConfiguration(port: port, mode: mode, clients: client, provider: providerSettings)
            }
        } else {
            provider = try await RelaisProcess.devProvider(mode: mode, clients: client, provider: providerSettings)
        }
        let preset = ["v2": "franceconnect-v2", "v1": "franceconnect-v1", "fcplus": "franceconnect-plus", "proconnect": "proconnect"][mode]!
        let prefix = mode == "v1" ? "/api/v1" : "/api/v2"
        var endpoints = ""
        if mode == "v1" {
            endpoints = """
                    authorization_endpoint: \(provider.baseURL)\(prefix)/authorize
                    token_endpoint: \(provider.baseURL)\(prefix)/token
                    userinfo_endpoint: \(provider.baseURL)\(prefix)/userinfo
                    end_session_endpoint: \(provider.baseURL)\(prefix)/logout
                """
        }
        var decryption = ""
        if let fcplusKey {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("relais-fcplus-\(UUID().uuidString).pem").path
            try fcplusKey.privateKeyPEM()!.write(toFile: path, atomically: true, encoding: .utf8)
            decryption = "    decryption_key_files: [\(path)]\n"
        }
        // Step-up: a second provider, FranceConnect+ (its own pairwise subs), decrypting with stepUpKey.
        var stepUpProvider: (any TestServer)?
        var stepUpSection = ""
        if let stepUpKey {
            let fcplusClient = client + "\n    jwks_uri: \(publicURL)/jwks/provider.json"
            let second = try await InProcessServer.launch(.devProvider, clock: clock) { port in
                RelaisProcess.devProviderConfiguration(port: port, mode: "fcplus", clients: fcplusClient, provider: providerSettings)
            }
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("relais-stepup-\(UUID().uuidString).pem").path
            try stepUpKey.privateKeyPEM()!.write(toFile: path, atomically: true, encoding: .utf8)
            stepUpSection = """
                    step_up_provider: fcplus
                  fcplus:
                    preset: franceconnect-plus
                    issuer: \(second.baseURL)/api/v2
                    client_id: relais
                    client_secret: \(providerSecret)
                    decryption_key_files: [\(path)]
                """
            stepUpProvider = second
        }
        var relays: [any TestServer] = []
        // Security events go to a file the harness reads back (all instances append to it), not
        // to the test run's output.
        let eventsFile = FileManager.default.temporaryDirectory.appendingPathComponent("relais-events-\(UUID().uuidString).jsonl").path
        let eventsSection = relayExtra.contains("security_events:") ? "" : "security_events:\n  output: \(eventsFile)"
        for port in relayPorts {
            let config: (Int) -> String = { port in
                """
                server:
                  environment: development
                  port: \(port)
                  public_base_url: \(publicURL)
                log:
                  level: warning
                store:
                \(store)
                http_client:
                  timeout: 3s
                providers:
                  fc:
                    preset: \(preset)
                    issuer: \(provider.baseURL)\(prefix)
                    client_id: relais
                    client_secret: \(providerSecret)
                \(endpoints)
                \(decryption)\(providerExtra)
                \(stepUpSection)
                apps:
                  app:
                    redirect_uris: ["http://127.0.0.1/cb", "com.example.app:/oauth2redirect"]
                    post_logout_redirect_uris: ["com.example.app:/logged-out"]
                    scopes: \(appScopes)
                \(relayExtra)
                \(eventsSection)
                """
            }
            if inProcess {
                relays.append(try await InProcessServer.launch(.relay, environment: relayEnvironment, port: port, clock: clock, config: config))
            } else {
                relays.append(try await RelaisProcess.launch("serve", environment: relayEnvironment, port: port, config: config))
            }
        }
        let harness = RelayHarness(provider: provider, relays: relays, mode: mode, clock: clock)
        harness.eventsFile = eventsFile
        harness.stepUpProvider = stepUpProvider
        return harness
    }

    // MARK: - HTTP

    func get(_ url: String, cookie: String? = nil) async throws -> HTTPClientResponse {
        var headers: [(name: String, value: String)] = []
        if let cookie { headers.append((name: "Cookie", value: cookie)) }
        return try await http.send(HTTPClientRequest(url: url, headers: headers))
    }

    func post(_ url: String, _ fields: [(String, String)], headers: [(name: String, value: String)] = []) async throws -> HTTPClientResponse {
        try await http.send(.form(url: url, fields: fields, headers: headers))
    }

    private func rememberProviderCookie(_ response: HTTPClientResponse) {
        for header in response.headers where header.name.lowercased() == "set-cookie" {
            let pair = header.value.split(separator: ";").first.map(String.init) ?? ""
            providerCookie = pair.hasSuffix("=") ? nil : pair
        }
    }

    static func query(_ url: String) throws -> FormParameters {
        try #require(FormParameters(encoded: url.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? ""))
    }

    // MARK: - The app

    struct AppRequest {
        var verifier = SecureRandom.token(bits: 256)
        var state = "app-state-" + SecureRandom.token(bits: 64)
        var nonce = "app-nonce-" + SecureRandom.token(bits: 64)
        var redirectURI = RelayHarness.appRedirect
        var scope: String? = "openid profile birth email"
        var extra: [(String, String)] = []

        var parameters: [(String, String)] {
            var fields = [
                ("response_type", "code"), ("client_id", "app"), ("redirect_uri", redirectURI), ("state", state), ("nonce", nonce),
                ("code_challenge", Base64URL.encode(SHA256.hash(Array(verifier.utf8)))), ("code_challenge_method", "S256"),
            ]
            if let scope { fields.append(("scope", scope)) }
            return fields + extra
        }
    }

    /// /authorize at `relay` → the provider's login page → pick `identity` (or cancel) → the provider's
    /// redirect to Relais' /callback (returned, not yet followed).
    func throughProvider(_ request: AppRequest, identity: String? = "angela", relay: (any TestServer)? = nil) async throws -> String {
        let start = try await get(FormParameters.url((relay ?? self.relay).baseURL + "/authorize", adding: request.parameters))
        try #require(start.status == 302, "authorize: \(start.status) \(start.bodyText)")
        let toProvider = try #require(start.header("location"))
        try #require(toProvider.hasPrefix(providerIssuer + "/authorize"), "authorize went to \(toProvider)")
        let interaction = try await get(toProvider, cookie: providerCookie)
        let pageURL = try #require(interaction.header("location"), "provider: \(interaction.status) \(interaction.bodyText)")
        let page = try await get(pageURL, cookie: providerCookie)
        let action = try #require(page.bodyText.firstMatch(of: /action="([^"]+)"/)?.1)
        let submit = try await post(
            provider.baseURL + action, identity.map { [("identity", $0)] } ?? [("cancel", "1")], headers: providerCookie.map { [(name: "Cookie", value: $0)] } ?? [])
        rememberProviderCookie(submit)
        return try #require(submit.header("location"))
    }

    /// Follows the provider's redirect into Relais' /callback; returns where Relais sends the app.
    func callback(_ url: String, relay: (any TestServer)? = nil, cookie: String? = nil) async throws -> HTTPClientResponse {
        var target = url
        if let relay { target = target.replacingOccurrences(of: self.relay.baseURL, with: relay.baseURL) }
        return try await get(target, cookie: cookie)
    }

    /// A whole sign-in up to the app's redirect; returns its query.
    func signIn(_ request: AppRequest = AppRequest(), identity: String = "angela") async throws -> FormParameters {
        let toRelay = try await throughProvider(request, identity: identity)
        let response = try await callback(toRelay)
        try #require(response.status == 302, "callback: \(response.status) \(response.bodyText)")
        let location = try #require(response.header("location"))
        try #require(location.hasPrefix(request.redirectURI), "callback went to \(location)")
        return try Self.query(location)
    }

    func exchange(_ code: String, _ request: AppRequest, relay: (any TestServer)? = nil) async throws -> HTTPClientResponse {
        try await post(
            (relay ?? self.relay).baseURL + "/token",
            [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI), ("client_id", "app"),
                ("code_verifier", request.verifier),
            ])
    }

    /// Sign-in and code exchange; returns the token response.
    func tokens(_ request: AppRequest = AppRequest(), identity: String = "angela") async throws -> [String: JSONValue] {
        let callback = try await signIn(request, identity: identity)
        let response = try await exchange(try #require(callback["code"], "the app got \(callback.oauthError ?? "no code")"), request)
        try #require(response.status == 200, "token: \(response.bodyText)")
        return try #require(JSONValue.object(from: response.body))
    }

    func refresh(_ token: String, relay: (any TestServer)? = nil) async throws -> HTTPClientResponse {
        try await post((relay ?? self.relay).baseURL + "/token", [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "app")])
    }

    func userinfo(_ accessToken: String) async throws -> HTTPClientResponse {
        try await http.send(HTTPClientRequest(url: issuer + "/userinfo", headers: [(name: "Authorization", value: "Bearer \(accessToken)")]))
    }

    /// The relay's `/metrics`: each `name{labels} value` line of the Prometheus text format, by `name{labels}`.
    func metrics() async throws -> [String: Double] {
        let response = try await get(issuer + "/metrics")
        try #require(response.status == 200)
        var values: [String: Double] = [:]
        for line in response.bodyText.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return values
    }

    /// What the counters gained since `before`, zero gains left out. In-process relays share the test
    /// process's one registry: a gain is this test's own only for counters that no test running
    /// beside it moves (see ``RelaySessionsAndProvidersChain``).
    func metrics(since before: [String: Double]) async throws -> [String: Double] {
        try await metrics().reduce(into: [:]) { gains, entry in
            let gain = entry.value - (before[entry.key] ?? 0)
            if gain != 0 { gains[entry.key] = gain }
        }
    }

    func relayKeys() async throws -> JWKSet {
        try JWKSet(json: try await get(issuer + "/jwks.json").body)
    }

    func armProvider(_ fault: String) async throws {
        let response = try await http.send(
            HTTPClientRequest(
                method: .post, url: provider.baseURL + "/_test/faults", headers: [(name: "Content-Type", value: "application/json")], body: Array(#"{"fault":"\#(fault)"}"#.utf8))
        )
        try #require(response.status == 201)
    }
}

extension FormParameters {
    /// The OAuth error of an app redirect, as `error: description`.
    var oauthError: String? { self["error"].map { "\($0): \(self["error_description"] ?? "")" } }
}
