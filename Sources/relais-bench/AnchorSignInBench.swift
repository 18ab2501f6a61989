import ArgumentParser
import RelaisHTTPClient

/// Whole sign-ins through Apache + mod_auth_openidc against the same development provider, for the
/// side-by-side rows of `make bench`: a browser asks for a protected page → provider login → the
/// module's redirect URI (code exchange, id_token and userinfo checks, a session in its Redis) → the
/// protected page again with the session cookie. Three requests reach the relying party, as with
/// Relais' /authorize, /callback and /token.
struct AnchorSignInBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin-mod-auth-openidc",
        abstract: "End-to-end sign-ins per second through Apache + mod_auth_openidc."
    )

    @Option(help: "The protected URL (a location with AuthType openid-connect).") var protected: String
    @Option(help: "Seconds to run.") var seconds = 10
    @Option(help: "Sign-ins in flight at once.") var concurrency = 8
    @Option(help: "Start sign-ins at this many a second (open loop) instead of keeping --concurrency in flight.") var rate: Int?
    @Option(help: "The provider the module signs in at (development, mock).") var provider = BenchProvider.development
    @Flag(help: "Only sign in once and print the session cookie (for wrk).") var printCookie = false

    func run() async throws {
        let http = HTTPClient(configuration: .init(maxConcurrentRequests: concurrency * 2))
        if printCookie {
            print(try await signIn(http))
            try await http.shutdown()
            return
        }
        for _ in 0..<concurrency { _ = try await signIn(http) }  // warm up: metadata and keys fetched
        let start = ContinuousClock.now
        let deadline = start + .seconds(seconds)
        let count = try await drive(rate: rate, concurrency: concurrency, from: start, until: deadline) { _ = try await signIn(http) }.count
        let elapsed = ContinuousClock.now - start
        try await http.shutdown()
        let rate = Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        print("signins=\(count) per_second=\((rate * 100).rounded() / 100)")
    }

    /// One sign-in in a fresh cookie jar; returns the session cookie (`name=value`).
    func signIn(_ http: HTTPClient) async throws -> String {
        var jar = CookieJar()
        let first = try await http.send(.init(url: protected))
        jar.take(first)
        let callbackURL = try await provider.login(http, authorizeURL: try location(first, "protected page"))
        let callback = try await http.send(.init(url: callbackURL, headers: jar.header))
        jar.take(callback)
        let back = try location(callback, "redirect URI")
        let page = try await http.send(.init(url: back.hasPrefix("/") ? origin(of: protected) + back : back, headers: jar.header))
        guard page.status == 200 else { throw BenchError("protected page after sign-in: HTTP \(page.status) \(page.bodyText.prefix(200))") }
        guard let session = jar.cookies.first(where: { $0.name.hasPrefix("mod_auth_openidc_session") }) else {
            throw BenchError("no session cookie after sign-in")
        }
        return "\(session.name)=\(session.value)"
    }
}

/// The cookies one browser holds for one site: enough for the module's state and session cookies.
struct CookieJar {
    var cookies: [(name: String, value: String)] = []

    mutating func take(_ response: HTTPClientResponse) {
        for header in response.headers where header.name.lowercased() == "set-cookie" {
            let pair = header.value.prefix { $0 != ";" }
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals].drop { $0 == " " })
            let value = String(pair[pair.index(after: equals)...])
            cookies.removeAll { $0.name == name }
            // The module deletes its state cookie by setting it empty, or with Max-Age=0; a cookie
            // deleted by a past Expires date stays here, which a bench client can afford.
            if !value.isEmpty && !header.value.lowercased().contains("max-age=0") { cookies.append((name, value)) }
        }
    }

    var header: [(name: String, value: String)] {
        cookies.isEmpty ? [] : [("Cookie", cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; "))]
    }
}
