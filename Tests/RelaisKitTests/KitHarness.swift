import Foundation
import RelaisClock
import RelaisHTTPClient
import RelaisJOSE
import RelaisKit
import RelaisTestSupport
import Synchronization
import Testing

/// The real relay and development provider (with a FranceConnect+ look-alike for step-ups), served
/// in this process on one manual clock, and RelaisKit clients that sign in through them: the
/// loopback listener gets its redirect from a "browser" that follows the provider's login page.
final class KitHarness: @unchecked Sendable {
    let provider: any TestServer
    let stepUpProvider: any TestServer
    let relay: any TestServer
    let clock: ManualClock
    let http = HTTPClient(configuration: .init(maxConcurrentRequests: 8))
    static let providerSecret = "relay-test-secret-0123456789-0123456789"

    var issuer: String { relay.baseURL }

    /// Apps: `plain` (bearer tokens), `secure` (`dpop: required`, `dpop_nonce: true`, `attestation:
    /// required`), and `desktop`, a device-grant app both may approve for.
    static func launch() async throws -> KitHarness {
        let clock = ManualClock()
        let relayPort = try FreePort.find()
        let publicURL = "http://127.0.0.1:\(relayPort)"
        let client = """
              relais:
                secret: \(providerSecret)
                redirect_uris: [\(publicURL)/callback]
                post_logout_redirect_uris: [\(publicURL)/logout/callback]
                jwks_uri: \(publicURL)/jwks/provider.json
            """
        let provider = try await InProcessServer.launch(.devProvider, clock: clock) { port in
            RelaisProcess.devProviderConfiguration(port: port, mode: "v2", clients: client, provider: "")
        }
        let fcplus = try await InProcessServer.launch(.devProvider, clock: clock) { port in
            RelaisProcess.devProviderConfiguration(port: port, mode: "fcplus", clients: client, provider: "")
        }
        let key = try TestKeys.rsa(use: "enc", pinAlgorithm: false)
        let keyPath = FileManager.default.temporaryDirectory.appendingPathComponent("relaiskit-stepup-\(UUID().uuidString).pem").path
        try key.privateKeyPEM()!.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let relay = try await InProcessServer.launch(.relay, port: relayPort, clock: clock) { port in
            """
            server:
              environment: development
              port: \(port)
              public_base_url: \(publicURL)
            log:
              level: warning
            store:
              kind: embedded
            http_client:
              timeout: 3s
            providers:
              fc:
                preset: franceconnect-v2
                issuer: \(provider.baseURL)/api/v2
                client_id: relais
                client_secret: \(providerSecret)
                step_up_provider: fcplus
              fcplus:
                preset: franceconnect-plus
                issuer: \(fcplus.baseURL)/api/v2
                client_id: relais
                client_secret: \(providerSecret)
                decryption_key_files: [\(keyPath)]
            apps:
              plain:
                redirect_uris: ["http://127.0.0.1/cb"]
                scopes: [openid, profile, birth, email]
              secure:
                redirect_uris: ["http://127.0.0.1/cb"]
                scopes: [openid, profile, birth, email]
                dpop: required
                dpop_nonce: true
                attestation: required
                client_attestation_lifetime: 2m
              desktop:
                redirect_uris: ["http://127.0.0.1/cb"]
                scopes: [openid, profile, email]
                device_grant: true
                device_approvers: [plain, secure]
            security_events:
              enabled: false
            """
        }
        return KitHarness(provider: provider, stepUpProvider: fcplus, relay: relay, clock: clock)
    }

    private init(provider: any TestServer, stepUpProvider: any TestServer, relay: any TestServer, clock: ManualClock) {
        self.provider = provider
        self.stepUpProvider = stepUpProvider
        self.relay = relay
        self.clock = clock
    }

    deinit {
        relay.stop()
        provider.stop()
        stepUpProvider.stop()
    }

    // MARK: Clients

    /// A client of `clientID` on `storage`, its transport counting what it sends.
    func client(
        _ clientID: String, storage: any SecureStorage = MemoryStorage(), identity: String? = "angela", keys: any ProofKeyFactory = SoftwareProofKeyFactory(),
        transport: CountingTransport = CountingTransport(), clockSkew: TimeInterval = 0,
        whileTheBrowserIsOpen: (@Sendable () async throws -> Void)? = nil
    ) -> RelaisClient {
        let secure = clientID == "secure"
        let configuration = RelaisConfiguration(
            issuer: issuer, clientID: clientID, scopes: clientID == "desktop" ? ["openid", "profile", "email"] : ["openid", "profile", "birth", "email"], dpop: secure,
            attestation: secure ? .development : nil,
            deviceName: "test device"
        )
        let browser = Browser(harness: self, identity: identity)
        let platform = RelaisPlatform(
            transport: transport, storage: storage, keys: keys,
            web: LoopbackWebAuthenticator { url in
                try await whileTheBrowserIsOpen?()
                try await browser.follow(url)
            },
            clock: KitClock(clock: clock, skew: clockSkew), wait: { [clock] seconds in clock.advance(by: .seconds(seconds)) }
        )
        return RelaisClient(configuration: configuration, platform: platform)
    }

    // MARK: The browser

    /// Follows the authorization URL through Relais and the provider's login page (picking
    /// `identity`, or cancelling when nil), then delivers Relais' redirect to the loopback listener.
    struct Browser: Sendable {
        let harness: KitHarness
        let identity: String?

        func follow(_ url: URL) async throws {
            let http = harness.http
            let start = try await http.send(HTTPClientRequest(url: url.absoluteString))
            let toProvider = try #require(start.header("location"), "authorize: \(start.status) \(start.bodyText)")
            let providerBase = [harness.provider.baseURL, harness.stepUpProvider.baseURL].first { toProvider.hasPrefix($0) }
            let base = try #require(providerBase, "authorize went to \(toProvider)")
            let interaction = try await http.send(HTTPClientRequest(url: toProvider))
            let page = try await http.send(HTTPClientRequest(url: try #require(interaction.header("location"), "provider: \(interaction.status)")))
            let action = try #require(page.bodyText.firstMatch(of: /action="([^"]+)"/)?.1)
            let submit = try await http.send(.form(url: base + action, fields: identity.map { [("identity", $0)] } ?? [("cancel", "1")]))
            let callback = try await http.send(HTTPClientRequest(url: try #require(submit.header("location"))))
            let toApp = try #require(callback.header("location"), "callback: \(callback.status) \(callback.bodyText)")
            // The redirect reaches the app's loopback listener, as the browser's would.
            let delivered = try await http.send(HTTPClientRequest(url: toApp))
            try #require(delivered.status == 200)
        }
    }

    /// A second signed-in device of the same person, the way another app instance would see it.
    func otherDevice(_ clientID: String = "plain") async throws -> RelaisClient {
        let other = client(clientID)
        try await other.signIn()
        return other
    }

    /// A device-grant request from `desktop`, as a desktop app makes it.
    func deviceRequest() async throws -> (deviceCode: String, userCode: String, complete: String) {
        let response = try await http.send(.form(url: issuer + "/device_authorization", fields: [("client_id", "desktop"), ("device_name", "kiosk 12")]))
        let body = try #require(JSONValue.object(from: response.body), "\(response.status) \(response.bodyText)")
        return (
            try #require(body["device_code"]?.stringValue), try #require(body["user_code"]?.stringValue),
            try #require(body["verification_uri_complete"]?.stringValue)
        )
    }
}

/// The harness's manual clock, as RelaisKit reads time.
struct KitClock: RelaisKitClock {
    let clock: ManualClock
    /// How far this device's clock is off (set by hand, never synchronised).
    var skew: TimeInterval = 0
    var now: Date { Date(timeIntervalSince1970: clock.now + skew) }
}

/// URLSession underneath, counting refreshes and recording every DPoP header sent (a class tests
/// may extend: ``HeldRefreshes``).
class CountingTransport: HTTPTransport, @unchecked Sendable {
    private let inner = URLSessionTransport()
    private let lock = NSLock()
    private var log: [(request: HTTPRequest, status: Int, error: String?)] = []

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let response = try await inner.send(request)
        let error =
            (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any])?["error"] as? String
            ?? response.header("WWW-Authenticate").flatMap { $0.firstMatch(of: /error="([^"]+)"/).map { String($0.1) } }
        lock.withLock { log.append((request, response.status, error)) }
        return response
    }

    var requests: [HTTPRequest] { lock.withLock { log.map(\.request) } }

    /// Token requests with `grant_type=refresh_token` that got an answer other than `use_dpop_nonce`.
    var refreshes: Int {
        lock.withLock {
            log.filter { entry in
                entry.request.url.path.hasSuffix("/token") && String(decoding: entry.request.body ?? Data(), as: UTF8.self).contains("grant_type=refresh_token")
                    && entry.error != "use_dpop_nonce"
            }.count
        }
    }

    /// The Relais `error` codes answered, in order.
    var errors: [String] { lock.withLock { log.compactMap(\.error) } }
}
