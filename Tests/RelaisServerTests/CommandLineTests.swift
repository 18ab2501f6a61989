import Foundation
import Hummingbird
import RelaisHTTPClient
import RelaisTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `relais` executable as an operator runs it: check-config, a refused bad config, serve + SIGTERM.
@Suite struct CommandLineTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let binary = packageRoot.appendingPathComponent(".build/debug/relais").path

    private func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("relais-\(UUID().uuidString)-\(name)").path
    }

    private func write(_ contents: String) throws -> String {
        let path = temporaryPath("config.yaml")
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32?, stdout: String, stderr: String) {
        let out = temporaryPath("out")
        let err = temporaryPath("err")
        let process = try ChildProcess.spawn(Self.binary, arguments, environment: environment, standardOutput: out, standardError: err)
        let status = await process.exitStatus(within: .seconds(30))
        if status == nil { process.terminate(with: SIGKILL) }
        return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "", (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    static let badConfiguration = """
        server:
          port: 99999
        store:
          kind: memcached
          redis:
            urll: redis://x
        """

    @Test func checkConfigAcceptsTheExample() async throws {
        let result = try await run(["check-config", Self.packageRoot.appendingPathComponent("config/relais.example.yaml").path])
        #expect(result.status == 0)
        #expect(result.stdout.contains("OK"))
    }

    /// The OTEL_* variables are checked like the file: `check-config` says what traces will do, and
    /// a value swift-otel would ignore (or stop on) refuses the start with exit 2.
    @Test func theTracingVariablesAreCheckedBeforeAnythingStarts() async throws {
        let example = Self.packageRoot.appendingPathComponent("config/relais.example.yaml").path
        #expect(try await run(["check-config", example]).stdout.contains("traces: off (OTEL_TRACES_EXPORTER is not otlp)"))
        let on = try await run(["check-config", example], environment: ["OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"])
        #expect(on.status == 0)
        #expect(on.stdout.contains("traces: OTLP/HTTP to http://127.0.0.1:4318/v1/traces, service relais, sampler parentbased_always_on"))
        let refused = ["OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_SAMPLER": "xray"]
        let provider = Self.packageRoot.appendingPathComponent("config/dev-provider.yaml").path
        for arguments in [["check-config", example], ["serve", "--config", example], ["dev-provider", "--config", provider, "--check"]] {
            let result = try await run(arguments, environment: refused)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains("invalid tracing environment (2 problems)"), "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf, got 'grpc'"))
        }
    }

    @Test func checkConfigProbeReachesTheStoreAndEachProvider() async throws {
        let redis = try await RedisServerProcess.launch()
        let provider = try await RelaisProcess.devProvider(
            clients: """
                  relais:
                    secret: probe-secret-0123456789-0123456789-0123
                    redirect_uris: [http://127.0.0.1:1/callback]
                """)
        let file = try write(
            """
            server: {environment: development, port: 1}
            store: {kind: redis, redis: {url: "\(redis.url)", connect_timeout: 500ms, command_timeout: 500ms}}
            http_client: {connect_timeout: 1s, timeout: 2s}
            providers:
              fc:
                preset: franceconnect-v2
                issuer: \(provider.baseURL)/api/v2
                client_id: relais
                client_secret: probe-secret-0123456789-0123456789-0123
            apps:
              app:
                redirect_uris: ["com.example.app:/cb"]
            """)
        let reachable = try await run(["check-config", "--probe", file])
        #expect(reachable.status == 0, "\(reachable.stdout)\(reachable.stderr)")
        #expect(reachable.stdout.contains("store (redis): OK"))
        #expect(reachable.stdout.contains("provider fc (\(provider.baseURL)/api/v2): OK: discovery document read, JWKS read (2 keys)"))  // its ES256 and RS256 keys

        redis.stop()
        provider.stop()
        let unreachable = try await run(["check-config", "--probe", file])
        #expect(unreachable.status == 1)
        #expect(unreachable.stdout.contains("store (redis): FAILED: store_unavailable: cannot connect to 127.0.0.1:\(redis.port)"))
        #expect(unreachable.stdout.contains("provider fc (\(provider.baseURL)/api/v2): FAILED: provider_unavailable:"))
        // Without --probe nothing is reached: the file alone is valid.
        #expect(try await run(["check-config", file]).status == 0)
    }

    @Test func checkConfigPrintsEveryProblemAndFails() async throws {
        let result = try await run(["check-config", try write(Self.badConfiguration)])
        #expect(result.status == 2)
        #expect(result.stderr.contains("invalid configuration (3 problems)"))
        #expect(result.stderr.contains("server.port: must be between 0 and 65535, got 99999"))
        #expect(result.stderr.contains("store.kind: expected one of redis, embedded; got 'memcached'"))
        #expect(result.stderr.contains("store.redis.urll: unknown key (did you mean 'store.redis.url'?) (line 6)"))
    }

    @Test func serveRefusesABadConfigurationWithTheSameMessages() async throws {
        let result = try await run(["serve", "--config", try write(Self.badConfiguration)])
        #expect(result.status == 2)
        #expect(result.stderr.contains("server.port: must be between 0 and 65535, got 99999"))
        #expect(result.stderr.contains("store.redis.urll: unknown key"))
    }

    @Test func serveAnswersThenStopsCleanlyOnSIGTERMWithJSONLogs() async throws {
        let port = try FreePort.find()
        let out = temporaryPath("out")
        let process = try ChildProcess.spawn(
            Self.binary,
            ["serve"],
            environment: [
                "RELAIS_SERVER_PORT": String(port), "RELAIS_STORE_KIND": "embedded", "RELAIS_LOG_FORMAT": "json",
                "RELAIS_SERVER_ENVIRONMENT": "development",
            ],
            standardOutput: out
        )
        let client = HTTPClient(configuration: .init(maxConcurrentRequests: 1))
        var healthy = false
        for _ in 0..<100 where !healthy {
            if let response = try? await client.send(.init(url: "http://127.0.0.1:\(port)/healthz")), response.status == 200 {
                healthy = true
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(healthy)
        let ready = try await client.send(.init(url: "http://127.0.0.1:\(port)/readyz?code=must-not-be-logged"))
        #expect(ready.status == 200)
        try await client.shutdown()

        process.signal(SIGTERM)
        let status = await process.exitStatus(within: .seconds(10))
        if status == nil { process.terminate(with: SIGKILL) }
        #expect(status == 0)

        let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["level"] != nil && object?["msg"] != nil, "not a JSON log line: \(line)")
        }
        let readyLine = try #require(lines.first { $0.contains(#""route":"/readyz""#) })
        #expect(readyLine.contains(#""request_id":"#))
        #expect(!readyLine.contains("must-not-be-logged"))
        #expect(lines.contains { $0.contains("relais stopped") })
        // No file, no provider, no app: it says so before serving, in the log's own format.
        #expect(lines.contains { $0.contains("no --config file given") && $0.contains("no provider and no app") && $0.contains("nobody can sign in") })
    }

    /// A port already taken: one plain sentence, exit 1, and no drain announced for a server
    /// that never served.
    @Test func serveSaysWhenItsPortIsAlreadyInUse() async throws {
        try await LoopbackHTTPServer.with(router: Router()) { taken in
            let result = try await run(
                ["serve"],
                environment: [
                    "RELAIS_SERVER_HOST": "127.0.0.1", "RELAIS_SERVER_PORT": String(taken.port), "RELAIS_STORE_KIND": "embedded",
                    "RELAIS_SERVER_ENVIRONMENT": "development",
                ]
            )
            #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("relais could not start: cannot listen on 127.0.0.1:\(taken.port). Address already in use: another process"), "\(result.stdout)")
            #expect(!result.stdout.contains("draining"), "\(result.stdout)")
            #expect(!result.stdout.contains("errno"), "\(result.stdout)")
        }
    }

    /// `relais --version`: the release and the commit. A plain `swift build` (as here) cannot know
    /// the commit and says "unknown"; `make release` and `make demo` put it in the build id.
    @Test func versionNamesTheReleaseAndTheCommit() async throws {
        let result = try await run(["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        let line = result.stdout.trimmingCharacters(in: .newlines)
        #expect(line.range(of: #"^relais [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{40}(-dirty)?|unknown)\)$"#, options: .regularExpression) != nil, "\(line)")
    }

    /// Without --markdown, the catalogues read as text; with it, they are the committed documents.
    @Test func errorsAndSecurityEventsPrintReadableTextAndTheirMarkdown() async throws {
        for (command, document, sample) in [("errors", "docs/errors.md", "invalid_request"), ("security-events", "docs/security-events.md", "session.opened")] {
            let text = try await run([command])
            #expect(text.status == 0, "\(command): \(text.stderr)")
            #expect(text.stdout.contains(sample), "\(command)")
            #expect(!text.stdout.contains("|---") && !text.stdout.contains("`") && !text.stdout.contains("<!--") && !text.stdout.contains("**"), "\(command)")
            let markdown = try await run([command, "--markdown"])
            #expect(markdown.status == 0)
            #expect(markdown.stdout == (try String(contentsOfFile: Self.packageRoot.appendingPathComponent(document).path, encoding: .utf8)), "\(command)")
        }
        // A table row becomes its first cell, then one `column: value` line per other cell.
        let errors = try await run(["errors"])
        #expect(errors.stdout.contains("invalid_request\n  status: 400\n"), "\(errors.stdout.prefix(2000))")
    }

    /// Another process cannot see an embedded store's sessions: refused, rather than "0 live session(s)".
    @Test func sessionsRefuseAnEmbeddedStore() async throws {
        let example = Self.packageRoot.appendingPathComponent("config/relais.example.yaml").path
        for verb in ["list", "revoke"] {
            let result = try await run(["sessions", verb, "--sub", "user-1", "--config", example], environment: ["RELAIS_STORE_KIND": "embedded"])
            #expect(result.status == 2, "\(verb): \(result.stdout)\(result.stderr)")
            #expect(result.stderr.contains("cannot \(verb) sessions: the store is embedded"), "\(result.stderr)")
            #expect(!result.stdout.contains("session(s)"))
        }
    }

    /// docs/commands.md's rows name the binary `make demo` builds (a release build of the
    /// `relais` product), every one the same way.
    @Test func theCommandRowsNameTheBinaryMakeDemoBuilds() throws {
        let makefile = try String(contentsOfFile: Self.packageRoot.appendingPathComponent("Makefile").path, encoding: .utf8)
        // `demo` depends on $(RELEASE_BINARY), .build/release/relais, which a release build of the product makes.
        let demo = try #require(makefile.components(separatedBy: "\ndemo:").dropFirst().first?.split(separator: "\n").first)
        #expect(demo.contains("$(RELEASE_BINARY)"), "\(demo)")
        #expect(makefile.contains("\nRELEASE_BINARY := .build/release/relais\n"))
        let rule = try #require(makefile.components(separatedBy: "\n$(RELEASE_BINARY):").dropFirst().first?.split(separator: "\n").dropFirst().first)
        #expect(rule.contains("$(SWIFT_BUILD) -c release --product relais"), "\(rule)")
        #expect(makefile.contains("\nSWIFT_BUILD := SWIFT_DETERMINISTIC_HASHING=1 $(SWIFT) build\n"))
        let commands = try String(contentsOfFile: Self.packageRoot.appendingPathComponent("docs/commands.md").path, encoding: .utf8)
        // A command row: its first cell is a command line whose program is relais (not the `relais` target's row).
        let rows = commands.split(separator: "\n").filter { line in
            guard line.hasPrefix("| `"), let command = line.dropFirst(3).split(separator: "`").first else { return false }
            let words = command.split(separator: " ")
            return words.count > 1 && words[0].hasSuffix("relais")
        }
        #expect(rows.count >= 10)
        for row in rows { #expect(row.hasPrefix("| `.build/release/relais "), "\(row.prefix(80))") }
    }

    @Test func devProviderCheckValidatesTheShippedFileAndRefusesABadOne() async throws {
        let shipped = try await run(["dev-provider", "--config", Self.packageRoot.appendingPathComponent("config/dev-provider.yaml").path, "--check"])
        #expect(shipped.status == 0)
        #expect(shipped.stdout.contains("OK (mode v2, 1 client(s), 3 identities, issuer http://127.0.0.1:8081/api/v2)"))
        let bad = try write("provider:\n  mode: v9\nclients: {}\n")
        let checked = try await run(["dev-provider", "--config", bad, "--check"])
        #expect(checked.status == 2)
        #expect(checked.stderr.contains("provider.mode: expected one of v2, v1, fcplus, proconnect; got 'v9'"))
        let served = try await run(["dev-provider", "--config", bad])
        #expect(served.status == 2)
    }

    @Test func devProviderRefusesAnUnusableSigningKeyAndStopsCleanlyOnSIGTERM() async throws {
        let identities = Self.packageRoot.appendingPathComponent("config/dev-identities.yaml").path
        let keyFile = temporaryPath("key.pem")
        try "not a key".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let port = try FreePort.find()
        let base = "server:\n  port: \(port)\nprovider:\n  identities_file: \(identities)\nclients:\n  app:\n    secret: s\n    redirect_uris: [http://127.0.0.1:9/cb]\n"
        let refused = try await run(["dev-provider", "--config", try write(base.replacingOccurrences(of: "provider:\n", with: "provider:\n  signing_key_file: \(keyFile)\n"))])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("development provider stopped on an error"))
        #expect(refused.stdout.contains("dev_provider_startup: provider.signing_key_file: \(keyFile) holds no usable key (jose_invalid_key)"))

        let process = try ChildProcess.spawn(Self.binary, ["dev-provider", "--config", try write(base)])
        var up = false
        for _ in 0..<200 where !up {
            up = FreePort.isAccepting(port: port)
            if !up { try await Task.sleep(for: .milliseconds(25)) }
        }
        #expect(up)
        process.signal(SIGTERM)
        let status = await process.exitStatus(within: .seconds(10))
        if status == nil { process.terminate(with: SIGKILL) }
        #expect(status == 0)
    }

    /// `relais reload` without a usable target, and `serve` unable to write its pid file.
    @Test func reloadAndThePidFileRefuseWhatTheyCannotUse() async throws {
        #expect(try await run(["reload"]).status == 64)  // neither --pid nor --pid-file
        let garbage = try write("not a pid\n")
        let unreadable = try await run(["reload", "--pid-file", garbage])
        #expect(unreadable.status == 2 && unreadable.stderr.contains("does not hold a process id"))
        // Above the largest process id Linux can give (2^22): no process has it.
        let gone = try await run(["reload", "--pid", "4194305"])
        #expect(gone.status == 1 && gone.stderr.contains("cannot signal process 4194305"))
        let example = Self.packageRoot.appendingPathComponent("config/relais.example.yaml").path
        let pidless = try await run(["serve", "--config", example, "--pid-file", "/nonexistent-dir/relais.pid"])
        #expect(pidless.status == 2 && pidless.stderr.contains("cannot write --pid-file"))
    }
}
