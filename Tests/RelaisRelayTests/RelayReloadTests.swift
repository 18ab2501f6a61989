import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisRelay

#if canImport(Glibc)
import Glibc
#endif

/// Live reload: a new configuration is swapped in whole, a refused one changes nothing.
@Suite struct RelayReloadTests {
    typealias Route = RelayRouteTests

    /// The relay's routes behind a swappable responder, with a reloader reading `next`.
    struct Reloadable {
        let reloader: ConfigurationReloader
        let responder: SwappableResponder
        let next = Next()
        let http: HTTPClient

        init(_ configuration: RelaisConfiguration) async throws {
            let clock = ManualClock()
            http = HTTPClient()
            let dependencies = RelaisDependencies(store: EmbeddedStore(clock: clock), httpClient: http)
            let routes: ConfigurationReloader.Routes = { current, dependencies in
                let relay = try await Relay(
                    configuration: current, store: dependencies.store, httpClient: dependencies.httpClient, clock: clock, eventSink: CollectedEvents(),
                    generateKey: TestKeys.generator())
                return relay.register(on:)
            }
            let register = try await routes(configuration, dependencies)
            responder = SwappableResponder(RelaisApplication.makeRouter(configuration: configuration, dependencies: dependencies, additionalRoutes: register).buildResponder())
            next.value.withLock { $0 = .success(configuration) }
            let next = next
            reloader = ConfigurationReloader(
                running: configuration, load: { try next.value.withLock { $0 }.get() }, routes: routes, dependencies: dependencies, responder: responder,
                logger: Logger(label: "reload-tests") { _ in SwiftLogNoOpLogHandler() }
            )
        }

        func test(_ body: @Sendable @escaping (any TestClientProtocol) async throws -> Void) async throws {
            let app = Application(responder: responder, logger: Logger(label: "reload-tests") { _ in SwiftLogNoOpLogHandler() })
            try await app.test(.router) { try await body($0) }
        }
    }

    /// What the reloader reads next: a configuration, or the problems that refuse it.
    final class Next: Sendable {
        let value = Mutex<Result<RelaisConfiguration, Refusal>>(.failure(Refusal(description: "not set")))
    }

    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    static func base() -> RelaisConfiguration {
        Route.Fixture().configuration
    }

    static func authorize(_ client: any TestClientProtocol, clientID: String) async throws -> TestResponse {
        let query = FormParameters.encode([
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", Route.redirect), ("code_challenge", String(repeating: "a", count: 43)),
            ("code_challenge_method", "S256"), ("scope", "openid"),
        ])
        return try await client.execute(uri: "/authorize?" + query, method: .get)
    }

    @Test(.tags(.fast)) func aReloadAddsAnAppAndARefusedOneChangesNothing() async throws {
        let reloadable = try await Reloadable(Self.base())
        try await reloadable.test { client in
            #expect(try await Self.authorize(client, clientID: "second").status == .badRequest)  // unknown_client
            var newer = Self.base()
            newer.apps.append(AppSettings(clientID: "second", redirectURIs: [Route.redirect], providers: ["fc"], scopes: ["openid"]))
            newer.server.port = 9999  // not reloadable: named, and the running value stays
            newer.rateLimit.perIP = 7
            reloadable.next.value.withLock { $0 = .success(newer) }
            #expect(await reloadable.reloader.reload() == .applied(needsRestart: ["server"]))
            #expect(reloadable.reloader.configuration.server.port == Self.base().server.port)
            #expect(reloadable.reloader.configuration.rateLimit.perIP == 7)
            // The new app is known: its request goes on to the provider (which is not reachable here).
            let known = try await Self.authorize(client, clientID: "second")
            #expect(known.status != .badRequest, "\(known.status) \(String(buffer: known.body))")

            reloadable.next.value.withLock { $0 = .failure(Refusal(description: "apps.x.redirect_uris: is empty")) }
            guard case .refused(let problems) = await reloadable.reloader.reload() else {
                Issue.record("a refused configuration was applied")
                return
            }
            #expect(problems.contains("apps.x.redirect_uris"))
            // Still the previous one: the second app stays, the limit too.
            #expect(reloadable.reloader.configuration.apps.map(\.clientID) == ["app", "second"])
            #expect(try await Self.authorize(client, clientID: "second").status == known.status)
        }
        try await reloadable.http.shutdown()
    }

    /// A file is checked under its own `server.environment`: one saying `development` must not
    /// bring development's leniency (the development attester, http issuers, generated keys) into
    /// a process started in production.
    @Test(.tags(.fast)) func aReloadNeverChangesTheEnvironment() async throws {
        var running = Self.base()
        running.server.environment = .production
        let reloadable = try await Reloadable(running)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("relais-reload-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: url) }
        try """
        server:
          environment: development
        providers:
          fc:
            preset: franceconnect-v2
            issuer: http://127.0.0.1:9/api/v2
            client_id: relais
            client_secret: s3cret
        apps:
          app:
            redirect_uris: ["\(Route.redirect)"]
            providers: [fc]
        """.write(to: url, atomically: true, encoding: .utf8)
        let newer = try await ConfigurationLoader.load(filePath: url.path, environment: [:], generateKey: TestKeys.generator())
        #expect(newer.server.environment == .development && newer.relay.devAttester)
        reloadable.next.value.withLock { $0 = .success(newer) }
        guard case .refused(let problems) = await reloadable.reloader.reload() else {
            Issue.record("a reload switched a production process to development")
            try await reloadable.http.shutdown()
            return
        }
        #expect(problems.contains("server.environment") && problems.contains("restart"))
        #expect(reloadable.reloader.configuration.server.environment == .production)
        #expect(!reloadable.reloader.configuration.relay.devAttester)
        #expect(reloadable.reloader.configuration.providers.map(\.issuer) == running.providers.map(\.issuer))
        try await reloadable.http.shutdown()
    }

    @Test func onlyTheStartupSectionsNeedARestart() {
        let running = Self.base()
        var newer = running
        newer.server.maxBodyBytes = 1024
        newer.server.trustedProxies = ["10.0.0.0/8"]
        newer.store.requestBudget = .seconds(3)
        #expect(running.reloaded(with: newer).needsRestart.isEmpty)
        newer.store.kind = running.store.kind == .redis ? .embedded : .redis
        newer.metrics.enabled.toggle()
        newer.log.level = .debug
        newer.httpClient.totalTimeout = .seconds(1)
        let (merged, needsRestart) = running.reloaded(with: newer)
        #expect(needsRestart == ["store", "http_client", "metrics", "log"])
        #expect(merged.store.kind == running.store.kind && merged.store.requestBudget == .seconds(3) && merged.server.maxBodyBytes == 1024)
    }

    /// In development, a FranceConnect+ provider without key files gets a generated decryption
    /// key at each load: a reload keeps the running one, so sign-ins encrypted to it still open.
    @Test(.tags(.fast)) func aGeneratedDecryptionKeySurvivesAReload() throws {
        var running = Self.base()
        running.providers[0].decryptionKeys = [try TestKeys.rsa(0, use: "enc", pinAlgorithm: false)]
        running.providers[0].decryptionKeysGenerated = true
        var newer = running
        newer.providers[0].decryptionKeys = [try TestKeys.rsa(1, use: "enc", pinAlgorithm: false)]
        let kept = running.reloaded(with: newer).configuration.providers[0].decryptionKeys.map { $0.thumbprint() }
        #expect(kept == running.providers[0].decryptionKeys.map { $0.thumbprint() })
        // Keys from files are the file's: a reload is how they rotate.
        newer.providers[0].decryptionKeysGenerated = false
        #expect(running.reloaded(with: newer).configuration.providers[0].decryptionKeys.map { $0.thumbprint() } == newer.providers[0].decryptionKeys.map { $0.thumbprint() })
    }
}

extension RelaySignInAndTokensChain {
    /// The real binary under SIGHUP every 200 ms while sign-ins run: none fails.
    @Suite struct RelayReloadProcessTests {
        @Test func signInsCompleteWhileTheConfigurationIsReloadedEvery200ms() async throws {
            let harness = try await RelayHarness.launch(inProcess: false)
            let relay = try #require(harness.relay as? RelaisProcess)
            let pid = try #require(relay.pid)
            let original = try String(contentsOfFile: relay.configPath, encoding: .utf8)
            let stop = RelayReloadTests.Flag()
            // Twelve reloads, 200 ms apart, each changing the file (a rate limit) so that each
            // builds a new router; three apps sign in over and over until the last one.
            let reloads = Task {
                for count in 1...12 {
                    try original.appending("\nrate_limit:\n  per_ip: \(100_000 + count)\n").write(toFile: relay.configPath, atomically: true, encoding: .utf8)
                    kill(pid, SIGHUP)
                    try await Task.sleep(for: .milliseconds(200))
                }
                stop.value.store(true, ordering: .relaxed)
                return 12
            }
            let outcomes = try await withThrowingTaskGroup(of: (signIns: Int, failures: [String]).self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        var (signIns, failures) = (0, [String]())
                        while !stop.value.load(ordering: .relaxed) {
                            do {
                                let tokens = try await harness.tokens()
                                if tokens["access_token"] == nil { failures.append("no access token: \(tokens)") } else { signIns += 1 }
                            } catch {
                                failures.append("\(error)")
                            }
                        }
                        return (signIns, failures)
                    }
                }
                return try await group.reduce(into: [(signIns: Int, failures: [String])]()) { $0.append($1) }
            }
            let sent = try await reloads.value
            let failures = outcomes.flatMap(\.failures)
            #expect(failures.isEmpty, "\(failures)")
            #expect(outcomes.allSatisfy { $0.signIns >= 2 }, "\(outcomes.map(\.signIns))")
            // The reloads happened (counted by the process), and none was refused.
            let metrics = try await harness.get(harness.issuer + "/metrics").bodyText
            let applied = metrics.split(separator: "\n").first { $0.hasPrefix(#"relais_config_reloads_total{outcome="applied"}"#) }
            let count = applied.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
            #expect(sent >= 3 && count >= 3, "sent \(sent), applied \(count)")
            #expect(!metrics.contains(#"relais_config_reloads_total{outcome="refused"}"#))

            // `relais reload --config` checks the file first: a broken one is not sent at all.
            try (original + "\nrate_limit:\n  per_ip: many\n").write(toFile: relay.configPath, atomically: true, encoding: .utf8)
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("relais-reload-\(UUID().uuidString)").path
            let checked = try ChildProcess.spawn(RelaisProcess.binary, ["reload", "--pid", String(pid), "--config", relay.configPath], standardError: output)
            #expect(await checked.exitStatus(within: .seconds(30)) == 2)
            #expect(try String(contentsOfFile: output, encoding: .utf8).contains("rate_limit.per_ip"))
            #expect(!(try await harness.get(harness.issuer + "/metrics").bodyText.contains(#"outcome="refused""#)))
            // Sent anyway (a plain SIGHUP), it is refused: logged, counted, and sign-ins go on with the old one.
            kill(pid, SIGHUP)
            let deadline = ContinuousClock.now + .seconds(10)
            // The refusal is counted, then logged: wait for both, or a loaded machine reads the log
            // between the two.
            var (refused, logged) = (false, false)
            while !(refused && logged), ContinuousClock.now < deadline {
                refused = try await harness.get(harness.issuer + "/metrics").bodyText.contains(#"relais_config_reloads_total{outcome="refused"} 1"#)
                logged = relay.log.contains("configuration reload refused")
                if !(refused && logged) { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(refused)
            #expect(logged)
            #expect(try await harness.tokens()["access_token"] != nil)
        }
    }
}
