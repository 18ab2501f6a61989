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
    @Option(help: "Start sign-ins at this many a second (open loop) instead of keeping --concurrency in flight.") var rate: Int?
    @Option(help: "The provider the relay signs in at (development, mock).") var provider = BenchProvider.development
    @Flag(help: "Only sign in once and print the access, refresh and id tokens (for wrk).") var printTokens = false

    struct Sample {
        var callback: Duration
        var provider: Duration
        /// The whole sign-in's time in Relais: /authorize, /callback less the provider's share, /token.
        var relais: Duration = .zero
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
        let samples = try await drive(rate: rate, concurrency: concurrency, from: start, until: deadline) { try await signIn(http).sample }
        let elapsed = ContinuousClock.now - start
        try await http.shutdown()
        func milliseconds(_ duration: Duration) -> Double { Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15 }
        func percentile(_ values: [Double], _ p: Double) -> Double { values.sorted()[min(values.count - 1, Int(Double(values.count) * p))] }
        let total = samples.map { milliseconds($0.callback) }
        let own = samples.map { milliseconds($0.callback) - milliseconds($0.provider) }
        let relaisShare = samples.map { milliseconds($0.relais) }
        let achieved = Double(samples.count) / (milliseconds(elapsed) / 1000)
        print(
            "signins=\(samples.count) per_second=\(format(achieved)) callback_p50_ms=\(format(percentile(total, 0.5))) callback_p99_ms=\(format(percentile(total, 0.99))) "
                + "own_p50_ms=\(format(percentile(own, 0.5))) own_p99_ms=\(format(percentile(own, 0.99))) "
                + "relais_p50_ms=\(format(percentile(relaisShare, 0.5))) relais_p99_ms=\(format(percentile(relaisShare, 0.99)))"
        )
    }

    private func format(_ value: Double) -> String { String((value * 100).rounded() / 100) }

    func signIn(_ http: HTTPClient, tokenHeaders: [(name: String, value: String)] = []) async throws -> (tokens: [String: String], sample: Sample) {
        let authorizeStart = ContinuousClock.now
        let started = try await authorize(http)
        let authorizeTime = ContinuousClock.now - authorizeStart
        let callbackURL = try await provider.login(http, authorizeURL: started.providerURL)
        let (code, callbackSample) = try await callback(http, callbackURL)
        var sample = callbackSample
        let tokenStart = ContinuousClock.now
        let tokens = try await token(http, code: code, verifier: started.verifier, headers: tokenHeaders)
        sample.relais = authorizeTime + sample.callback - sample.provider + (ContinuousClock.now - tokenStart)
        return (tokens, sample)
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

/// The provider a sign-in benchmark logs in at: the person's part differs.
enum BenchProvider: String, ExpressibleByArgument, Sendable {
    /// Relais' development provider: its login page, then angela's identity posted.
    case development
    /// oidc-provider-mock (PyPI): a form on the authorize URL itself, a subject posted back to it.
    case mock

    /// From the provider's /authorize URL to where it sends the browser back (the callback).
    func login(_ http: HTTPClient, authorizeURL: String) async throws -> String {
        switch self {
        case .development:
            let interaction = try location(try await http.send(.init(url: authorizeURL)), "provider authorize")
            let page = try await http.send(.init(url: interaction)).bodyText
            guard let action = page.firstMatch(of: /action="([^"]+)"/)?.1 else { throw BenchError("no login form at the provider") }
            let login = try await http.send(.form(url: origin(of: interaction) + action, fields: [("identity", "angela")]))
            return try location(login, "provider login")
        case .mock:
            let form = try await http.send(.init(url: authorizeURL))
            guard form.status == 200, form.bodyText.contains("name=\"sub\"") else { throw BenchError("no subject form at the provider: HTTP \(form.status)") }
            return try location(try await http.send(.form(url: authorizeURL, fields: [("sub", "alice")])), "provider login")
        }
    }
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

/// Runs `signIn` until `deadline` and returns what each run returned. With a `rate`, open loop:
/// run i starts at `start + i/rate` whatever the earlier ones do, so a slow answer cannot lower the
/// load it is measured under (no coordinated omission); without, `concurrency` runs stay in flight.
func drive<Sample: Sendable>(
    rate: Int?, concurrency: Int, from start: ContinuousClock.Instant, until deadline: ContinuousClock.Instant,
    _ signIn: @escaping @Sendable () async throws -> Sample
) async throws -> [Sample] {
    try await withThrowingTaskGroup(of: [Sample].self) { group in
        if let rate {
            let interval = Duration.seconds(1) / rate
            var next = start
            while next < deadline {
                try await Task.sleep(until: next, clock: .continuous)
                group.addTask { [try await signIn()] }
                next += interval
            }
        } else {
            for _ in 0..<concurrency {
                group.addTask {
                    var samples: [Sample] = []
                    while ContinuousClock.now < deadline { samples.append(try await signIn()) }
                    return samples
                }
            }
        }
        return try await group.reduce(into: []) { $0 += $1 }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
