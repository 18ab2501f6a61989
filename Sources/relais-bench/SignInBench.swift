import ArgumentParser
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// Whole sign-ins against a running Relais and development provider, as an app and a person
/// would do them: /authorize → provider login → /callback → /token. Reports sign-ins per second and
/// the callback's latency with and without the provider's share (Relais' `Server-Timing`).
struct SignInBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "signin", abstract: "End-to-end sign-ins per second and callback latency.")

    @Option(help: "Relais' base URL.") var relay: String
    @Option(help: "The app's client_id.") var clientID = "bench-app"
    @Option(help: "The app's registered redirect URI.") var redirectURI = "http://127.0.0.1/cb"
    @Option(help: "Seconds to run.") var seconds = 10
    @Option(help: "Sign-ins in flight at once.") var concurrency = 8
    @Flag(help: "Only sign in once and print the access, refresh and id tokens (for wrk).") var printTokens = false

    struct Sample {
        var callback: Duration
        var provider: Duration
    }

    func run() async throws {
        let http = HTTPClient(configuration: .init(maxConcurrentRequests: concurrency * 2))
        if printTokens {
            let tokens = try await signIn(http).tokens
            for name in ["access_token", "refresh_token", "id_token"] { print("\(name)=\(tokens[name] ?? "")") }
            try await http.shutdown()
            return
        }
        for _ in 0..<concurrency { _ = try await signIn(http) }  // warm up: keys fetched, connections open
        let start = ContinuousClock.now
        let deadline = start + .seconds(seconds)
        let samples = try await withThrowingTaskGroup(of: [Sample].self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var samples: [Sample] = []
                    while ContinuousClock.now < deadline { samples.append(try await signIn(http).sample) }
                    return samples
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let elapsed = ContinuousClock.now - start
        try await http.shutdown()
        func milliseconds(_ duration: Duration) -> Double { Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15 }
        func percentile(_ values: [Double], _ p: Double) -> Double { values.sorted()[min(values.count - 1, Int(Double(values.count) * p))] }
        let total = samples.map { milliseconds($0.callback) }
        let own = samples.map { milliseconds($0.callback) - milliseconds($0.provider) }
        let rate = Double(samples.count) / (milliseconds(elapsed) / 1000)
        print(
            "signins=\(samples.count) per_second=\(format(rate)) callback_p50_ms=\(format(percentile(total, 0.5))) callback_p99_ms=\(format(percentile(total, 0.99))) "
                + "own_p50_ms=\(format(percentile(own, 0.5))) own_p99_ms=\(format(percentile(own, 0.99)))"
        )
    }

    private func format(_ value: Double) -> String { String((value * 100).rounded() / 100) }

    func signIn(_ http: HTTPClient, tokenHeaders: [(name: String, value: String)] = []) async throws -> (tokens: [String: String], sample: Sample) {
        let started = try await authorize(http)
        let callbackURL = try await providerLogin(http, authorizeURL: started.providerURL)
        let (code, sample) = try await callback(http, callbackURL)
        return (try await token(http, code: code, verifier: started.verifier, headers: tokenHeaders), sample)
    }

    /// The app's /authorize: returns where Relais sends the browser (the provider) and the PKCE verifier.
    func authorize(_ http: HTTPClient) async throws -> (providerURL: String, verifier: String) {
        let verifier = SecureRandom.token(bits: 256)
        let challenge = Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
        let fields = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("state", SecureRandom.token(bits: 64)),
            ("code_challenge", challenge), ("code_challenge_method", "S256"), ("scope", "openid profile email"),
        ]
        let authorize = try await http.send(.init(url: FormParameters.url(relay + "/authorize", adding: fields)))
        return (try location(authorize, "authorize"), verifier)
    }

    /// The provider's return to Relais' /callback: returns the code Relais gives the app.
    func callback(_ http: HTTPClient, _ callbackURL: String) async throws -> (code: String, sample: Sample) {
        let callbackStart = ContinuousClock.now
        let callback = try await http.send(.init(url: callbackURL))
        let callbackTime = ContinuousClock.now - callbackStart
        let toApp = try location(callback, "callback")
        guard let query = toApp.split(separator: "?").last.flatMap({ FormParameters(encoded: $0) }), let code = query["code"] else {
            throw BenchError("the app got no code: \(toApp)")
        }
        let providerTime = callback.header("server-timing").flatMap { Double($0.split(separator: "=").last ?? "") }.map { Duration.microseconds(Int($0 * 1000)) } ?? .zero
        return (code, Sample(callback: callbackTime, provider: providerTime))
    }

    /// The app's code exchange at /token: returns the token response's strings.
    func token(_ http: HTTPClient, code: String, verifier: String, headers: [(name: String, value: String)] = []) async throws -> [String: String] {
        let token = try await http.send(
            .form(
                url: relay + "/token",
                fields: [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                    ("client_id", clientID), ("code_verifier", verifier),
                ], headers: headers))
        guard token.status == 200, let object = JSONValue.object(from: token.body) else { throw BenchError("token: \(token.status) \(token.bodyText)") }
        return object.compactMapValues(\.stringValue)
    }
}

/// The person's part at the development provider, from its /authorize URL: the login page, then
/// angela's identity posted; returns where the provider sends the browser back (the callback).
func providerLogin(_ http: HTTPClient, authorizeURL: String) async throws -> String {
    let interaction = try location(try await http.send(.init(url: authorizeURL)), "provider authorize")
    let page = try await http.send(.init(url: interaction)).bodyText
    guard let action = page.firstMatch(of: /action="([^"]+)"/)?.1 else { throw BenchError("no login form at the provider") }
    let login = try await http.send(.form(url: origin(of: interaction) + action, fields: [("identity", "angela")]))
    return try location(login, "provider login")
}

/// `scheme://host:port` of an absolute URL, where a path-only `Location` or form action is resolved.
func origin(of url: String) -> String {
    let parts = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
    return parts.count >= 3 ? "\(parts[0])//\(parts[2])" : url
}

func location(_ response: HTTPClientResponse, _ step: String) throws -> String {
    guard (300..<400).contains(response.status), let location = response.header("location") else {
        throw BenchError("\(step): HTTP \(response.status) \(response.bodyText.prefix(200))")
    }
    return location
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
