import Foundation
import RelaisHTTPClient
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisConfig

@Suite(.tags(.fast)) struct ConfigurationLoaderTests {
    private static let examplePath: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("config/relais.example.yaml").path
    }()

    private func temporaryFile(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("relais-config-\(UUID().uuidString)")
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    private func problems(file: String?, environment: [String: String] = [:]) async -> [ConfigProblem] {
        do {
            _ = try await ConfigurationLoader.load(filePath: file, environment: environment, generateKey: TestKeys.generator())
            return []
        } catch {
            return error.problems
        }
    }

    @Test func theExampleConfigurationIsValid() async throws {
        let configuration = try await ConfigurationLoader.load(filePath: Self.examplePath, environment: [:], generateKey: TestKeys.generator())
        #expect(configuration.server.port == 8080)
        #expect(configuration.server.publicBaseURL == "http://127.0.0.1:8080")
        #expect(configuration.store.kind == .redis)
        #expect(configuration.store.redis.host == "127.0.0.1" && configuration.store.redis.port == 6379)
        #expect(configuration.store.redis.keyPrefix == "relais:")
        #expect(configuration.httpClient.totalTimeout == .seconds(10))
        #expect(configuration.httpClient.tls.verifyPeer)
    }

    @Test func defaultsApplyWithoutAFile() async throws {
        let configuration = try await ConfigurationLoader.load(filePath: nil, environment: ["RELAIS_SERVER_ENVIRONMENT": "development"], generateKey: TestKeys.generator())
        var defaults = RelaisConfiguration()
        defaults.server.environment = .development
        // Development turns the development attester on.
        defaults.relay.devAttester = true
        #expect(configuration.server == defaults.server && configuration.store == defaults.store && configuration.log == defaults.log)
        #expect(configuration.httpClient == defaults.httpClient && configuration.relay == defaults.relay)
        #expect(configuration.providers.isEmpty && configuration.apps.isEmpty && configuration.resourceServers.isEmpty)
    }

    @Test func productionRequiresRelaisOwnKeysOnceAppsAreConfigured() async throws {
        let file = try temporaryFile(
            """
            providers:
              fc:
                preset: franceconnect-v2
                issuer: https://oidc.franceconnect.gouv.fr/api/v2
                client_id: abc
                client_secret: s3cret
            apps:
              app:
                redirect_uris: ["com.example.app:/cb"]
            forward_auth:
              audiences: [app]
            """
        )
        let found = await problems(file: file)
        #expect(
            found.map(\.description) == [
                "signing.keys: production needs Relais' own signing keys (development generates one and keeps it in the store)",
                "sessions.keys: production needs a session encryption key (development generates one and keeps it in the store)",
            ])
    }

    @Test func environmentVariablesOverrideTheFile() async throws {
        let configuration = try await ConfigurationLoader.load(
            filePath: Self.examplePath,
            environment: [
                "RELAIS_SERVER_PORT": "9999",
                "RELAIS_STORE_KIND": "embedded",
                "RELAIS_STORE_REDIS_URL": "redis://redis.internal:6380/2",
                "RELAIS_HTTP_CLIENT_TIMEOUT": "4s",
                "RELAIS_LOG_FORMAT": "json",
                "PATH": "/usr/bin",  // not ours: ignored
            ], generateKey: TestKeys.generator()
        )
        #expect(configuration.server.port == 9999)
        #expect(configuration.store.kind == .embedded)
        #expect(configuration.store.redis.host == "redis.internal" && configuration.store.redis.database == 2)
        #expect(configuration.httpClient.totalTimeout == .seconds(4))
        #expect(configuration.log.format == .json)
    }

    @Test func secretsAreReadFromFiles() async throws {
        let secretFile = try temporaryFile("s3cret-from-file\n")
        let configuration = try await ConfigurationLoader.load(
            filePath: Self.examplePath,
            environment: ["RELAIS_STORE_REDIS_PASSWORD_FILE": secretFile], generateKey: TestKeys.generator()
        )
        #expect(configuration.store.redis.password == "s3cret-from-file")
    }

    @Test func aSecretSetTwiceOrFromAMissingFileIsAProblem() async throws {
        let both = await problems(
            file: Self.examplePath,
            environment: [
                "RELAIS_STORE_REDIS_PASSWORD": "inline", "RELAIS_STORE_REDIS_PASSWORD_FILE": "/nonexistent",
            ])
        #expect(both.map(\.keyPath) == ["store.redis.password"])
        let missing = await problems(file: Self.examplePath, environment: ["RELAIS_STORE_REDIS_PASSWORD_FILE": "/nonexistent/secret"])
        #expect(missing.map(\.keyPath) == ["store.redis.password_file"])
        #expect(!missing[0].description.contains("inline"))
        let empty = await problems(file: Self.examplePath, environment: ["RELAIS_STORE_REDIS_PASSWORD_FILE": try temporaryFile("\n")])
        #expect(empty.map(\.message).first?.hasSuffix("is empty") == true)
    }

    /// A port in the public URL is ASCII digits from 1 to 65535; anything else is refused by name
    /// (Arabic-Indic and fullwidth digits included), never read as some other port.
    @Test(arguments: ["http://127.0.0.1:٨٠٨٠", "http://127.0.0.1:８０８０", "http://127.0.0.1:0", "http://127.0.0.1:65536", "http://127.0.0.1:", "http://[::1]:80x", "http://[::1]x"])
    func aPublicURLPortIsASCIIDigitsInRange(url: String) async throws {
        let found = await problems(file: Self.examplePath, environment: ["RELAIS_SERVER_PUBLIC_BASE_URL": url])
        #expect(found.map(\.keyPath) == ["server.public_base_url"], "\(url)")
        #expect(found.first?.message.hasPrefix("the port must be 1 to 65535 in ASCII digits") == true, "\(url)")
    }

    @Test(arguments: ["9090", "127.0.0.1:", ":9090", "127.0.0.1:99999", "127.0.0.1:٩٠٩٠", "127.0.0.1:0"])
    func aMetricsListenerIsHostAndPort(listen: String) async throws {
        let found = await problems(file: Self.examplePath, environment: ["RELAIS_METRICS_LISTEN": listen])
        #expect(found.map(\.description) == ["metrics.listen: '\(listen)' is not host:port (for example 127.0.0.1:9090)"], "\(listen)")
        let short = await problems(file: Self.examplePath, environment: ["RELAIS_METRICS_BEARER_TOKEN": "short"])
        #expect(short.map(\.description) == ["metrics.bearer_token: use at least 16 bytes"])
        let configuration = try await ConfigurationLoader.load(filePath: Self.examplePath, environment: ["RELAIS_METRICS_LISTEN": "[::1]:9090"], generateKey: TestKeys.generator())
        #expect(configuration.metrics.listenHost == "::1" && configuration.metrics.listenPort == 9090)
    }

    /// Keys carry their session's hash tag; a brace in the prefix would replace it for every key.
    @Test(arguments: ["relais{", "a}b", "{all}:"])
    func aKeyPrefixWithABraceIsRefused(prefix: String) async throws {
        let found = await problems(file: Self.examplePath, environment: ["RELAIS_STORE_REDIS_KEY_PREFIX": prefix])
        #expect(found.map(\.description) == ["store.redis.key_prefix: must not contain '{' or '}' (Redis Cluster hash tags)"], "\(prefix)")
    }

    @Test(arguments: ["http://127.0.0.1:8080", "http://[::1]:443", "http://localhost"])
    func aPublicURLWithAValidPortIsAccepted(url: String) async throws {
        #expect(await problems(file: Self.examplePath, environment: ["RELAIS_SERVER_PUBLIC_BASE_URL": url, "RELAIS_SERVER_ENVIRONMENT": "development"]).isEmpty)
    }

    @Test func everyProblemIsReportedAtOnceWithItsKeyPath() async throws {
        let file = try temporaryFile(
            """
            server:
              port: eighty
              public_base_url: http://relais.example.fr
              drain_timeout: 20
            log:
              level: loud
            store:
              kind: memcached
              redis:
                url: memcache://redis:6380
                pool_size: 0
            http_client:
              timeout: 2s
              connect_timeout: 5s
              follow_redirects: maybe
              proxy: proxy.internal:3128
              tls:
                verify: false
                ca_bundle: /nonexistent/ca.pem
                client_certificate: \(Self.examplePath)
            """)
        let found = await problems(file: file)
        let keys = Set(found.map(\.keyPath))
        #expect(
            keys == [
                "server.port", "server.public_base_url", "server.drain_timeout", "log.level", "store.kind", "store.redis.url",
                "store.redis.pool_size", "http_client.connect_timeout", "http_client.follow_redirects", "http_client.proxy",
                "http_client.tls.verify", "http_client.tls.ca_bundle", "http_client.tls",
            ])
        #expect(found.first { $0.keyPath == "server.port" }?.message == "expected a whole number, got 'eighty'")
        #expect(found.first { $0.keyPath == "store.kind" }?.message == "expected one of redis, embedded; got 'memcached'")
    }

    @Test func redisTLSComesFromARedissURLAndItsSettings() async throws {
        let ca = try temporaryFile("not read here: only its presence is checked")
        let configuration = try await ConfigurationLoader.load(
            filePath: Self.examplePath,
            environment: [
                "RELAIS_STORE_REDIS_URL": "rediss://cache.internal:6380/2", "RELAIS_STORE_REDIS_TLS_CA_BUNDLE": ca,
                "RELAIS_STORE_REDIS_TLS_SERVER_NAME": "redis.internal",
            ], generateKey: TestKeys.generator())
        #expect(configuration.store.redis.tls == RedisConfiguration.TLS(caBundlePath: ca, serverName: "redis.internal"))
        #expect(configuration.store.redis.host == "cache.internal" && configuration.store.redis.database == 2)
        // redis:// is plain TCP.
        #expect(try await ConfigurationLoader.load(filePath: Self.examplePath, environment: [:], generateKey: TestKeys.generator()).store.redis.tls == nil)

        // TLS settings without rediss://, verification off in production, half a client identity, a missing CA file.
        let plain = await problems(file: Self.examplePath, environment: ["RELAIS_STORE_REDIS_TLS_CA_BUNDLE": ca])
        #expect(plain.map(\.description) == ["store.redis.tls: TLS settings need a rediss:// URL in store.redis.url"])
        let unverified = await problems(
            file: Self.examplePath,
            environment: [
                "RELAIS_SERVER_ENVIRONMENT": "production", "RELAIS_STORE_REDIS_URL": "rediss://cache:6380", "RELAIS_STORE_REDIS_TLS_VERIFY": "false",
            ])
        #expect(
            unverified.filter { $0.keyPath.hasPrefix("store.") }.map(\.description) == [
                "store.redis.tls.verify: TLS verification can only be turned off with server.environment: development"
            ])
        let halfIdentity = await problems(file: Self.examplePath, environment: ["RELAIS_STORE_REDIS_URL": "rediss://cache:6380", "RELAIS_STORE_REDIS_TLS_CLIENT_CERTIFICATE": ca])
        #expect(halfIdentity.map(\.description) == ["store.redis.tls: client_certificate and client_key go together: set both for mutual TLS, or neither"])
        let missing = await problems(
            file: Self.examplePath, environment: ["RELAIS_STORE_REDIS_URL": "rediss://cache:6380", "RELAIS_STORE_REDIS_TLS_CA_BUNDLE": "/nonexistent/ca.pem"])
        #expect(missing.map(\.keyPath) == ["store.redis.tls.ca_bundle"])
        // Development (the example's environment) may turn verification off.
        let development = try await ConfigurationLoader.load(
            filePath: Self.examplePath,
            environment: [
                "RELAIS_STORE_REDIS_URL": "rediss://cache:6380", "RELAIS_STORE_REDIS_TLS_VERIFY": "false",
            ], generateKey: TestKeys.generator())
        #expect(development.store.redis.tls?.verifyPeer == false)
    }

    @Test func redisSentinelSettings() async throws {
        let secret = try temporaryFile("sentinel-secret\n")
        let file = try temporaryFile(
            """
            server:
              environment: development
            store:
              redis:
                url: redis://:master-secret@unused:6379/1
                sentinel:
                  master_name: relais-master
                  nodes: [sentinel-a, "sentinel-b:26380", "[fd00::3]:26381"]
                  password_file: \(secret)
            """)
        let configuration = try await ConfigurationLoader.load(filePath: file, environment: [:], generateKey: TestKeys.generator())
        let sentinel = try #require(configuration.store.redis.sentinel)
        #expect(sentinel.masterName == "relais-master" && sentinel.password == "sentinel-secret" && sentinel.username == nil)
        #expect(sentinel.nodes.map(\.description) == ["sentinel-a:26379", "sentinel-b:26380", "[fd00::3]:26381"])
        #expect(configuration.store.redis.password == "master-secret" && configuration.store.redis.database == 1)

        // From the environment, nodes are comma-separated.
        let fromEnvironment = try await ConfigurationLoader.load(
            filePath: nil,
            environment: [
                "RELAIS_SERVER_ENVIRONMENT": "development", "RELAIS_STORE_REDIS_SENTINEL_MASTER_NAME": "m",
                "RELAIS_STORE_REDIS_SENTINEL_NODES": "s1:26390,s2",
            ], generateKey: TestKeys.generator())
        #expect(fromEnvironment.store.redis.sentinel?.nodes.map(\.description) == ["s1:26390", "s2:26379"])

        let halves = await problems(file: nil, environment: ["RELAIS_SERVER_ENVIRONMENT": "development", "RELAIS_STORE_REDIS_SENTINEL_MASTER_NAME": "m"])
        #expect(halves.map(\.description) == ["store.redis.sentinel: master_name and nodes go together: the master's name and at least one sentinel"])
        let badNode = try temporaryFile(
            """
            server: {environment: development}
            store: {redis: {sentinel: {master_name: m, nodes: ["ok:1", "bad:port"]}}}
            """)
        #expect(await problems(file: badNode).map(\.description) == ["store.redis.sentinel.nodes: 'bad:port' is not host[:port] (the port defaults to 26379)"])
        let orphan = await problems(file: nil, environment: ["RELAIS_SERVER_ENVIRONMENT": "development", "RELAIS_STORE_REDIS_SENTINEL_PASSWORD": "x"])
        #expect(orphan.map(\.description) == ["store.redis.sentinel: credentials without master_name and nodes"])
    }

    @Test func theSessionLimitPerPersonIsReadAndBounded() async throws {
        #expect(
            try await ConfigurationLoader.load(filePath: nil, environment: ["RELAIS_SERVER_ENVIRONMENT": "development"], generateKey: TestKeys.generator()).relay
                .maxSessionsPerSubject == 50)
        let five = try await ConfigurationLoader.load(
            filePath: nil, environment: ["RELAIS_SERVER_ENVIRONMENT": "development", "RELAIS_SESSIONS_MAX_PER_SUBJECT": "5"], generateKey: TestKeys.generator())
        #expect(five.relay.maxSessionsPerSubject == 5)
        for bad in ["0", "10001", "many"] {
            let found = await problems(file: nil, environment: ["RELAIS_SERVER_ENVIRONMENT": "development", "RELAIS_SESSIONS_MAX_PER_SUBJECT": bad])
            #expect(found.map(\.keyPath) == ["sessions.max_per_subject"], "\(bad)")
        }
    }

    @Test func redisClusterSettings() async throws {
        let file = try temporaryFile(
            """
            server: {environment: development}
            store:
              redis:
                url: rediss://relais:secret@unused
                cluster: [node-a, "node-b:7001", "[fd00::3]:7002"]
            """)
        let redis = try await ConfigurationLoader.load(filePath: file, environment: [:], generateKey: TestKeys.generator()).store.redis
        #expect(redis.cluster?.map(\.description) == ["node-a:6379", "node-b:7001", "[fd00::3]:7002"])
        #expect(redis.username == "relais" && redis.password == "secret" && redis.tls != nil)

        let fromEnvironment = try await ConfigurationLoader.load(
            filePath: nil,
            environment: [
                "RELAIS_SERVER_ENVIRONMENT": "development", "RELAIS_STORE_REDIS_CLUSTER": "c1:7000,c2",
            ], generateKey: TestKeys.generator())
        #expect(fromEnvironment.store.redis.cluster?.map(\.description) == ["c1:7000", "c2:6379"])

        let refusals: [(String, [String])] = [
            ("store: {redis: {cluster: [\"ok:1\", \"bad:port\"]}}", ["store.redis.cluster: 'bad:port' is not host[:port] (the port defaults to 6379)"]),
            ("store: {redis: {cluster: []}}", ["store.redis.cluster: needs at least one node (host:port)"]),
            ("store: {redis: {url: \"redis://h/2\", cluster: [a]}}", ["store.redis.url: Redis Cluster has only database 0; remove /2 from the URL"]),
            (
                "store: {redis: {cluster: [a], sentinel: {master_name: m, nodes: [s]}}}",
                ["store.redis.cluster: Sentinel and Cluster exclude each other: a cluster fails over by itself"]
            ),
            (
                "store: {redis: {url: \"unix:///run/redis.sock\", cluster: [a]}}",
                ["store.redis.url: a unix:// socket reaches one Redis on this machine: Sentinel and Cluster need host:port nodes and a redis:// URL"]
            ),
            (
                "store: {redis: {url: \"unix:///run/redis.sock\", sentinel: {master_name: m, nodes: [s]}}}",
                ["store.redis.url: a unix:// socket reaches one Redis on this machine: Sentinel and Cluster need host:port nodes and a redis:// URL"]
            ),
            ("store: {redis: {url: \"unix:///run/redis.sock\", tls: {verify: true}}}", ["store.redis.tls: TLS settings need a rediss:// URL in store.redis.url"]),
            (
                "store: {redis: {url: \"unix://redis.sock\"}}",
                ["store.redis.url: invalid Unix-domain socket: the path must be absolute (expected unix://[user[:password]@]/path/to/redis.sock[?db=N])"]
            ),
        ]
        for (store, expected) in refusals {
            let bad = try temporaryFile("server: {environment: development}\n" + store)
            #expect(await problems(file: bad).map(\.description) == expected, "\(store)")
        }
    }

    /// What Kubernetes injects for Services named `relais`, `relais-redis` and `relais-server` in the
    /// namespace: set aside with one warning, never read (not even `RELAIS_SERVER_PORT`, which is
    /// also a real key), never a reason to refuse to start.
    @Test func kubernetesServiceLinksAreSetAsideWithAWarning() async throws {
        let links = [
            "RELAIS_PORT": "tcp://10.96.12.7:8080", "RELAIS_SERVICE_HOST": "10.96.12.7", "RELAIS_SERVICE_PORT": "8080",
            "RELAIS_SERVICE_PORT_HTTP": "8080", "RELAIS_PORT_8080_TCP": "tcp://10.96.12.7:8080", "RELAIS_PORT_8080_TCP_PROTO": "tcp",
            "RELAIS_PORT_8080_TCP_PORT": "8080", "RELAIS_PORT_8080_TCP_ADDR": "10.96.12.7",
            "RELAIS_REDIS_SERVICE_HOST": "fd00::12", "RELAIS_REDIS_PORT": "tcp://[fd00::12]:6379", "RELAIS_REDIS_PORT_6379_TCP_ADDR": "fd00::12",
            "RELAIS_SERVER_PORT": "tcp://10.96.0.9:9000",
        ]
        let configuration = try await ConfigurationLoader.load(filePath: Self.examplePath, environment: links, generateKey: TestKeys.generator())
        #expect(configuration.server.port == 8080)
        // The example's FranceConnect+ provider adds its own warning (a generated development key).
        let kubernetes = configuration.warnings.filter { $0.contains("Kubernetes") }
        #expect(kubernetes.count == 1)
        let warning = try #require(kubernetes.first)
        #expect(warning.hasPrefix("ignored 12 Kubernetes service-link variable(s) (RELAIS_PORT, RELAIS_PORT_8080_TCP,"))
        #expect(warning.hasSuffix("set enableServiceLinks: false in the pod spec to stop Kubernetes from injecting them"))

        // The typo check still holds for everything without the shape Kubernetes gives.
        let typos = await problems(
            file: Self.examplePath,
            environment: [
                "RELAIS_PORT": "8080", "RELAIS_SERVICE_HOST": "relais.internal", "RELAIS_PORT_8080_TCP_PROTO": "http", "RELAIS_SERVR_PORT": "8080",
            ])
        #expect(typos.map(\.keyPath) == ["RELAIS_PORT", "RELAIS_PORT_8080_TCP_PROTO", "RELAIS_SERVICE_HOST", "RELAIS_SERVR_PORT"])
        #expect(typos.allSatisfy { $0.message == "unknown environment variable (no configuration key maps to it)" })
        // A real key with a real value is read as before.
        #expect(try await ConfigurationLoader.load(filePath: Self.examplePath, environment: ["RELAIS_SERVER_PORT": "9000"], generateKey: TestKeys.generator()).server.port == 9000)
    }

    @Test func unknownKeysAreReportedWithASuggestionAndLine() async throws {
        let file = try temporaryFile(
            """
            server:
              prot: 8080
            stor:
              kind: embedded
            metrics:
              enabled: true
              path: /m
            """)
        let found = await problems(file: file)
        #expect(
            found.map(\.description) == [
                "server.prot: unknown key (did you mean 'server.port'?) (line 2)",
                "stor: unknown key (did you mean 'store'?) (line 3)",
                "metrics.path: unknown key (line 7)",
            ])
    }

    @Test func wrongShapesAreReported() async throws {
        let file = try temporaryFile(
            """
            server: 8080
            log:
              level: [info, debug]
            providers: [franceconnect]
            """)
        let found = await problems(file: file)
        #expect(found.map(\.keyPath) == ["server", "log.level", "providers"])
    }

    @Test func unknownEnvironmentVariablesAreReported() async throws {
        let found = await problems(file: nil, environment: ["RELAIS_SERVER_PROT": "1", "RELAIS_PROVIDERS_FC_CLIENT_ID": "x"])
        #expect(found.map(\.keyPath) == ["RELAIS_PROVIDERS_FC_CLIENT_ID", "RELAIS_SERVER_PROT"])
        #expect(found.first?.message.contains("no entry of providers maps to it (the file defines none)") == true)
    }

    /// A variable under a keyed section names an id of the file and one of its entry's keys; a
    /// mistyped key, an id the file lacks, or a name that fits two entries is an error.
    @Test func environmentVariablesUnderKeyedSectionsAreChecked() async throws {
        let file = try temporaryFile(
            """
            server:
              environment: development
            providers:
              fc:
                preset: franceconnect-plus
                issuer: https://auth.franceconnect.gouv.fr/api/v2
                client_id: abc
                client_secret: s3cret
            apps:
              my-app:
                redirect_uris: ["com.example.app:/cb"]
              myApp:
                redirect_uris: ["com.example.other:/cb"]
              other_one:
                redirect_uris: ["com.example.third:/cb"]
            """
        )
        let found = await problems(
            file: file,
            environment: [
                "RELAIS_PROVIDERS_FC_REQUIRE_ENCRYPTED_ID_TOKN": "true",
                "RELAIS_PROVIDERS_FC_CLIENT_ID": "fine",
                "RELAIS_PROVIDERS_FCP_CLIENT_ID": "x",
                "RELAIS_APPS_MY_APP_SCOPES": "openid",
                "RELAIS_APPS_OTHER_ONE_SCOPES": "openid",
            ])
        #expect(
            found.map(\.description) == [
                "RELAIS_APPS_MY_APP_SCOPES: names several keys at once (apps.my-app.scopes, apps.myApp.scopes): rename an id so that each spells "
                    + "differently in upper case with '_' for '-', or set the key in the file",
                "RELAIS_PROVIDERS_FCP_CLIENT_ID: no entry of providers maps to it (the file defines fc); a variable only overrides a key of an entry the file defines",
                "RELAIS_PROVIDERS_FC_REQUIRE_ENCRYPTED_ID_TOKN: no key of providers.fc maps to it (did you mean RELAIS_PROVIDERS_FC_REQUIRE_ENCRYPTED_ID_TOKEN?)",
            ])
        let fine = try await ConfigurationLoader.load(
            filePath: file, environment: ["RELAIS_PROVIDERS_FC_CLIENT_ID": "fine", "RELAIS_APPS_OTHER_ONE_SCOPES": "openid"], generateKey: TestKeys.generator())
        #expect(fine.providers.first?.clientID == "fine")
    }

    /// A key that is present but empty is a problem naming it, never its default: an empty
    /// `RELAIS_METRICS_BEARER_TOKEN_FILE` must not leave /metrics open, an empty `dpop` must not
    /// allow what the app's default allows. `store.redis.key_prefix` documents empty as meaningful.
    @Test func anEmptyValueIsAProblemNotTheDefault() async throws {
        let file = try temporaryFile(
            """
            server:
              environment: development
            store:
              redis:
                key_prefix: ""
            providers:
              fc:
                preset: franceconnect-v2
                issuer: https://oidc.franceconnect.gouv.fr/api/v2
                client_id: abc
                client_secret: s3cret
                require_callback_iss: ""
            apps:
              x:
                redirect_uris: ["com.example.app:/cb"]
                dpop: ""
                access_token_lifetime:
            """
        )
        let found = await problems(file: file, environment: ["RELAIS_METRICS_BEARER_TOKEN_FILE": ""])
        let empty = "is empty: give it a value, or remove it (from the file and the environment) for its default"
        #expect(
            found.map(\.description).sorted() == [
                "apps.x.access_token_lifetime: \(empty)", "apps.x.dpop: \(empty)", "metrics.bearer_token_file: \(empty)",
                "providers.fc.require_callback_iss: \(empty)",
            ])
        let shared = try temporaryFile("server:\n  environment: development\nstore:\n  redis:\n    key_prefix: \"\"\n")
        #expect(try await ConfigurationLoader.load(filePath: shared, environment: [:], generateKey: TestKeys.generator()).store.redis.keyPrefix == "")
    }

    @Test func unreadableOrInvalidFilesAreProblems() async throws {
        let missing = await problems(file: "/nonexistent/relais.yaml")
        #expect(missing.count == 1 && missing[0].keyPath == "(file)" && missing[0].message.contains("cannot open"))
        let invalid = await problems(file: try temporaryFile("server:\n  port: [1,\n"))
        #expect(invalid.count == 1 && invalid[0].message.hasPrefix("not valid YAML"))
        let scalar = await problems(file: try temporaryFile("just a string"))
        #expect(scalar.map(\.message) == ["the top level must be a mapping of sections"])
    }

    /// Yams' description of a syntax error quotes the offending line, which may hold a secret:
    /// the problem says where and what, never the text.
    @Test func aYAMLSyntaxErrorNamesThePlaceNotTheText() async throws {
        let found = await problems(file: try temporaryFile("providers:\n  fc:\n    client_id: abc\n    client_secret: s3cr3t: x\n"))
        #expect(found.count == 1)
        let message = found.first?.description ?? ""
        #expect(message.hasPrefix("(file): not valid YAML: mapping values are not allowed in this context at line 4, column "), "\(message)")
        #expect(!message.contains("s3cr3t"), "\(message)")
        #expect(!message.contains("client_secret"), "\(message)")
    }

    /// A '/' in a Redis password ends the authority early: what follows reads as the database,
    /// and the problem must echo none of it.
    @Test func aRedisURLWithASlashInThePasswordIsNotEchoed() async throws {
        let found = await problems(
            file: nil, environment: ["RELAIS_SERVER_ENVIRONMENT": "development", "RELAIS_STORE_REDIS_URL": "redis://s3cr3t/tail@redis:6379"])
        #expect(found.map(\.keyPath) == ["store.redis.url"])
        let message = found.first?.description ?? ""
        #expect(message.contains("invalid database index"), "\(message)")
        for part in ["s3cr3t", "tail", "redis:6379"] { #expect(!message.contains(part), "\(message)") }
    }

    @Test func durationsNeedAUnit() {
        #expect(DurationText.parse("250ms") == .milliseconds(250))
        #expect(DurationText.parse("3s") == .seconds(3))
        #expect(DurationText.parse("5m") == .seconds(300))
        #expect(DurationText.parse("1h") == .seconds(3600))
        #expect(DurationText.parse("5") == nil)
        #expect(DurationText.parse("-1s") == nil)
        #expect(DurationText.parse("s") == nil)
    }
}
