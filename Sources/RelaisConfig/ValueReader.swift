import Configuration
import Logging
import RelaisHTTPClient
import RelaisJOSE
import RelaisStore

#if canImport(Glibc)
import Glibc
#endif

/// The keys a ``ValueReader`` asked for: single values and lists.
final class AskedKeys {
    var leaf: Set<String> = []
    var list: Set<String> = []
}

/// Reads every known key as text through swift-configuration and parses it with messages that name
/// the key and the expected form. Unset keys keep their defaults.
struct ValueReader {
    let config: ConfigReader
    private(set) var problems: [ConfigProblem] = []
    /// Every key asked for, so the schema can be derived from the readers (``ConfigSchema/survey``).
    let asked = AskedKeys()
    /// Makes the keys development generates (a provider's decryption key).
    let generateKey: KeyGenerator

    init(config: ConfigReader, generateKey: @escaping KeyGenerator = JWK.freshKey) {
        self.config = config
        self.generateKey = generateKey
    }

    mutating func readRelay(ids: (String) -> [String]) -> RelaisConfiguration {
        var result = RelaisConfiguration()
        result.server = readServer(defaults: result.server)
        result.log = readLog()
        result.store = readStore(defaults: result.store, environment: result.server.environment)
        if text("store.redis.pool_size") != nil {
            // Still read (and checked) for one release, so that a configuration carrying it starts.
            result.warnings.append(
                "store.redis.pool_size: deprecated and ignored: the store now runs on the server's event loops, one Redis connection per loop and server; remove the setting"
            )
        }
        result.httpClient = readHTTPClient(environment: result.server.environment)
        result.metrics = readMetrics(defaults: result.metrics)
        readRelaySections(into: &result, ids: ids)
        return result
    }

    mutating func readMetrics(defaults: RelaisConfiguration.Metrics) -> RelaisConfiguration.Metrics {
        var metrics = defaults
        metrics.enabled = boolean("metrics.enabled") ?? metrics.enabled
        if let listen = text("metrics.listen") {
            // host:port, or [v6]:port; the port in ASCII digits.
            let colon = listen.lastIndex(of: ":")
            let host = colon.map { String(listen[..<$0]) } ?? ""
            let port = colon.map { String(listen[listen.index(after: $0)...]) } ?? ""
            let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            if !bareHost.isEmpty, !port.isEmpty, port.utf8.count <= 5, port.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let number = Int(port), (1...65535).contains(number) {
                metrics.listenHost = bareHost
                metrics.listenPort = number
            } else {
                problem("metrics.listen", "'\(listen)' is not host:port (for example 127.0.0.1:9090)")
            }
        }
        metrics.bearerToken = secret("metrics.bearer_token")
        if let token = metrics.bearerToken, token.utf8.count < 16 { problem("metrics.bearer_token", "use at least 16 bytes") }
        return metrics
    }

    mutating func readServer(defaults: RelaisConfiguration.Server) -> RelaisConfiguration.Server {
        var server = defaults
        server.environment = choice("server.environment", default: server.environment)
        server.host = text("server.host") ?? server.host
        server.port = integer("server.port", in: 0...65535) ?? server.port
        server.maxBodyBytes = integer("server.max_body_bytes", in: 1024...(16 << 20)) ?? server.maxBodyBytes
        server.drainTimeout = duration("server.drain_timeout") ?? server.drainTimeout
        server.headerTimeout = duration("server.header_timeout") ?? server.headerTimeout
        server.idleTimeout = duration("server.idle_timeout") ?? server.idleTimeout
        server.maxConnections = integer("server.max_connections", in: 1...1_000_000) ?? server.maxConnections
        if let proxies = list("server.trusted_proxies") {
            for proxy in proxies where IPNetwork(proxy) == nil {
                problem(
                    "server.trusted_proxies",
                    "'\(proxy)' is not an IP address or CIDR network (10.0.0.0/8, ::1/128; an IPv4-mapped network is written as IPv4: 10.0.0.0/8)")
            }
            server.trustedProxies = proxies
        }
        if let url = text("server.public_base_url") {
            server.publicBaseURL = url.hasSuffix("/") ? String(url.dropLast()) : url
        } else {
            server.publicBaseURL = "http://\(server.host):\(server.port)"
        }
        checkPublicBaseURL(server.publicBaseURL, environment: server.environment)
        return server
    }

    mutating func readLog() -> RelaisConfiguration.Log {
        var log = RelaisConfiguration.Log()
        if let level = text("log.level") {
            if let parsed = Logger.Level(rawValue: level.lowercased()) {
                log.level = parsed
            } else {
                problem("log.level", "expected one of trace, debug, info, notice, warning, error, critical; got '\(level)'")
            }
        }
        log.format = choice("log.format", default: log.format)
        return log
    }

    mutating func readStore(defaults: RelaisConfiguration.Store, environment: RelaisConfiguration.Environment) -> RelaisConfiguration.Store {
        var store = defaults
        store.kind = choice("store.kind", default: store.kind)
        store.requestBudget = duration("store.request_budget") ?? store.requestBudget
        var redis = store.redis
        if let url = text("store.redis.url") {
            do {
                try redis.apply(url: url)
            } catch {
                problem("store.redis.url", error.description)
            }
        }
        if let username = text("store.redis.username") { redis.username = username }
        if let password = secret("store.redis.password") { redis.password = password }
        // Deprecated, ignored by the store (readRelay warns); checked for one more release.
        redis.poolSize = integer("store.redis.pool_size", in: 1...256) ?? redis.poolSize
        redis.connectTimeout = duration("store.redis.connect_timeout") ?? redis.connectTimeout
        redis.commandTimeout = duration("store.redis.command_timeout") ?? redis.commandTimeout
        if let prefix = text("store.redis.key_prefix", allowEmpty: true) {
            // A brace would become the hash tag of every key and put all of them in one cluster slot.
            if prefix.contains("{") || prefix.contains("}") {
                problem("store.redis.key_prefix", "must not contain '{' or '}' (Redis Cluster hash tags)")
            } else {
                redis.keyPrefix = prefix
            }
        }
        readRedisTLS(into: &redis, environment: environment)
        readRedisSentinel(into: &redis)
        readRedisCluster(into: &redis)
        if redis.socketPath != nil && (redis.sentinel != nil || redis.cluster != nil) { problem("store.redis.url", Self.oneSocketOnly) }
        store.redis = redis
        return store
    }

    static let oneSocketOnly = "a unix:// socket reaches one Redis on this machine: Sentinel and Cluster need host:port nodes and a redis:// URL"
    /// `store.redis.sentinel.*`: the master comes from these sentinels; the URL's host and port
    /// are then unused (its credentials, database and scheme still apply).
    private mutating func readRedisSentinel(into redis: inout RedisConfiguration) {
        let masterName = text("store.redis.sentinel.master_name")
        let nodes = list("store.redis.sentinel.nodes")
        let username = text("store.redis.sentinel.username")
        let password = secret("store.redis.sentinel.password")
        guard masterName != nil || nodes != nil else {
            if username != nil || password != nil {
                problem("store.redis.sentinel", "credentials without master_name and nodes")
            }
            return
        }
        guard let masterName, let nodes, !nodes.isEmpty else {
            problem("store.redis.sentinel", "master_name and nodes go together: the master's name and at least one sentinel")
            return
        }
        var parsed: [RedisConfiguration.Sentinel.Node] = []
        for node in nodes {
            guard let value = RedisConfiguration.Node(parsing: node, defaultPort: 26379) else {
                problem("store.redis.sentinel.nodes", "'\(node)' is not host[:port] (the port defaults to 26379)")
                continue
            }
            parsed.append(value)
        }
        redis.sentinel = RedisConfiguration.Sentinel(masterName: masterName, nodes: parsed, username: username, password: password)
    }

    /// `store.redis.cluster`: seed nodes of a Redis Cluster; the URL's host and port are then unused
    /// (its credentials and scheme apply to every node).
    private mutating func readRedisCluster(into redis: inout RedisConfiguration) {
        guard let nodes = list("store.redis.cluster") else { return }
        guard !nodes.isEmpty else {
            problem("store.redis.cluster", "needs at least one node (host:port)")
            return
        }
        if redis.sentinel != nil {
            problem("store.redis.cluster", "Sentinel and Cluster exclude each other: a cluster fails over by itself")
        }
        if redis.database != 0 {
            problem("store.redis.url", "Redis Cluster has only database 0; remove /\(redis.database) from the URL")
        }
        var parsed: [RedisConfiguration.Node] = []
        for node in nodes {
            guard let value = RedisConfiguration.Node(parsing: node, defaultPort: 6379) else {
                problem("store.redis.cluster", "'\(node)' is not host[:port] (the port defaults to 6379)")
                continue
            }
            parsed.append(value)
        }
        redis.cluster = parsed
    }

    /// `store.redis.tls.*` refine TLS, which the `rediss://` scheme turns on.
    private mutating func readRedisTLS(into redis: inout RedisConfiguration, environment: RelaisConfiguration.Environment) {
        let verify = boolean("store.redis.tls.verify")
        let caBundle = readableFile("store.redis.tls.ca_bundle")
        let certificate = readableFile("store.redis.tls.client_certificate")
        let key = readableFile("store.redis.tls.client_key")
        let serverName = text("store.redis.tls.server_name")
        guard var tls = redis.tls else {
            if verify != nil || caBundle != nil || certificate != nil || key != nil || serverName != nil {
                problem("store.redis.tls", "TLS settings need a rediss:// URL in store.redis.url")
            }
            return
        }
        tls.verifyPeer = verify ?? tls.verifyPeer
        if !tls.verifyPeer && environment == .production {
            problem("store.redis.tls.verify", "TLS verification can only be turned off with server.environment: development")
        }
        tls.caBundlePath = caBundle ?? tls.caBundlePath
        tls.clientCertificatePath = certificate ?? tls.clientCertificatePath
        tls.clientKeyPath = key ?? tls.clientKeyPath
        tls.serverName = serverName ?? tls.serverName
        if (tls.clientCertificatePath == nil) != (tls.clientKeyPath == nil),
            !problems.contains(where: { $0.keyPath.hasPrefix("store.redis.tls.client_") })
        {
            problem("store.redis.tls", "client_certificate and client_key go together: set both for mutual TLS, or neither")
        }
        redis.tls = tls
    }

    private mutating func readHTTPClient(environment: RelaisConfiguration.Environment) -> HTTPClientConfiguration {
        var http = HTTPClientConfiguration()
        http.connectTimeout = duration("http_client.connect_timeout") ?? http.connectTimeout
        http.totalTimeout = duration("http_client.timeout") ?? http.totalTimeout
        http.maxResponseBytes = integer("http_client.max_response_bytes", in: 1024...(64 << 20)) ?? http.maxResponseBytes
        http.followRedirects = boolean("http_client.follow_redirects") ?? http.followRedirects
        http.maxRedirects = integer("http_client.max_redirects", in: 0...20) ?? http.maxRedirects
        http.maxConcurrentRequests = integer("http_client.max_concurrent_requests", in: 1...512) ?? http.maxConcurrentRequests
        if let proxy = text("http_client.proxy") {
            let scheme = proxy.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false).first.map { $0.lowercased() }
            if proxy.contains("://"), let scheme, ["http", "https", "socks5", "socks5h"].contains(scheme) {
                http.proxy = proxy
            } else {
                problem("http_client.proxy", "expected a proxy URL such as http://proxy.example:3128 (http, https, socks5 or socks5h)")
            }
        }
        http.noProxy = text("http_client.no_proxy") ?? http.noProxy
        http.userAgent = text("http_client.user_agent") ?? http.userAgent
        http.tls.verifyPeer = boolean("http_client.tls.verify") ?? http.tls.verifyPeer
        if !http.tls.verifyPeer && environment == .production {
            problem("http_client.tls.verify", "TLS verification can only be turned off with server.environment: development")
        }
        http.tls.caBundlePath = readableFile("http_client.tls.ca_bundle")
        http.tls.clientCertificatePath = readableFile("http_client.tls.client_certificate")
        http.tls.clientKeyPath = readableFile("http_client.tls.client_key")
        http.tls.clientKeyPassword = secret("http_client.tls.client_key_password")
        if (http.tls.clientCertificatePath == nil) != (http.tls.clientKeyPath == nil),
            !problems.contains(where: { $0.keyPath.hasPrefix("http_client.tls.client_") })
        {
            problem("http_client.tls", "client_certificate and client_key go together: set both for mutual TLS, or neither")
        }
        if http.connectTimeout > http.totalTimeout {
            problem("http_client.connect_timeout", "is longer than http_client.timeout, which includes it")
        }
        return http
    }

    // MARK: - Typed readers

    mutating func problem(_ key: String, _ message: String) {
        problems.append(ConfigProblem(key, message))
    }

    /// The raw text of a key. A key that is present (in the file or the environment) but empty is
    /// a problem, never its default (an empty `metrics.bearer_token_file` must not leave `/metrics`
    /// open), unless `allowEmpty`: the key documents an empty value as meaningful.
    mutating func text(_ key: String, allowEmpty: Bool = false, isSecret: Bool = false) -> String? {
        asked.leaf.insert(key)
        guard let value = config.string(forKey: ConfigKey(key), isSecret: isSecret) else { return nil }
        let trimmed = value.trimmingSpaces()
        if trimmed.isEmpty && !allowEmpty {
            let empty = ConfigProblem(key, "is empty: give it a value, or remove it (from the file and the environment) for its default")
            if !problems.contains(empty) { problems.append(empty) }  // some keys are read twice
            return nil
        }
        return trimmed
    }

    mutating func integer(_ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let raw = text(key) else { return nil }
        guard let value = Int(raw) else {
            problem(key, "expected a whole number, got '\(raw)'")
            return nil
        }
        guard range.contains(value) else {
            problem(key, "must be between \(range.lowerBound) and \(range.upperBound), got \(value)")
            return nil
        }
        return value
    }

    mutating func boolean(_ key: String) -> Bool? {
        guard let raw = text(key) else { return nil }
        switch raw.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default:
            problem(key, "expected true or false, got '\(raw)'")
            return nil
        }
    }

    mutating func choice<Value: RawRepresentable & CaseIterable>(_ key: String, default value: Value) -> Value
    where Value.RawValue == String {
        guard let raw = text(key) else { return value }
        guard let parsed = Value(rawValue: raw.lowercased()) else {
            problem(key, "expected one of \(Value.allCases.map(\.rawValue).joined(separator: ", ")); got '\(raw)'")
            return value
        }
        return parsed
    }

    /// Durations are written with a unit: `250ms`, `3s`, `5m`, `1h`, `30d`.
    mutating func duration(_ key: String) -> Duration? {
        guard let raw = text(key) else { return nil }
        guard let parsed = DurationText.parse(raw), parsed > .zero else {
            problem(key, "expected a positive duration with a unit (250ms, 3s, 5m, 1h, 30d), got '\(raw)'")
            return nil
        }
        return parsed
    }

    /// A duration within bounds that keep a protection working (a refresh grace of 30 days would
    /// neutralise reuse detection); with `wholeSeconds`, a whole number of seconds, for settings
    /// the runtime counts in seconds (never truncated silently).
    mutating func duration(_ key: String, atLeast lower: Duration? = nil, atMost upper: Duration? = nil, wholeSeconds: Bool = false) -> Duration? {
        guard let value = duration(key) else { return nil }
        let whole = value.components.attoseconds == 0
        let inRange = value >= (lower ?? value) && value <= (upper ?? value)
        guard inRange, whole || !wholeSeconds else {
            let unit = wholeSeconds ? "a whole number of seconds" : "a duration"
            let bounds = [lower.map { "at least \(DurationText.format($0))" }, upper.map { "at most \(DurationText.format($0))" }].compactMap { $0 }
            problem(key, "expected \(unit)\(bounds.isEmpty ? "" : ", " + bounds.joined(separator: " and ")), got '\(DurationText.format(value))'")
            return nil
        }
        return value
    }

    /// A size in bytes: `512KiB`, `8MiB`, `1GiB`, or a plain number of bytes.
    mutating func byteSize(_ key: String, atMost limit: Int) -> Int? {
        guard let raw = text(key) else { return nil }
        guard let parsed = ByteSizeText.parse(raw), parsed <= limit else {
            problem(key, "expected a size of at most \(ByteSizeText.format(limit)) (0, 512KiB, 8MiB, 1GiB or a number of bytes), got '\(raw)'")
            return nil
        }
        return parsed
    }

    /// A secret comes from its key or, preferably, from a file named by `<key>_file` (Docker and
    /// Kubernetes secrets); setting both is ambiguous and refused. The value is never echoed.
    mutating func secret(_ key: String) -> String? {
        let inline = text(key, isSecret: true)
        guard let path = text(key + "_file") else { return inline }
        if inline != nil {
            problem(key, "set either \(key) or \(key)_file, not both")
            return nil
        }
        switch ConfigurationLoader.readFile(path) {
        case .success(let contents):
            // Secret files conventionally end with a newline that is not part of the secret.
            var value = contents
            while value.hasSuffix("\n") || value.hasSuffix("\r") { value.removeLast() }
            guard !value.isEmpty else {
                problem(key + "_file", "\(path) is empty")
                return nil
            }
            return value
        case .failure(let failure):
            problem(key + "_file", failure.message)
            return nil
        }
    }

    func list(_ key: String) -> [String]? {
        asked.list.insert(key)
        return config.stringArray(forKey: ConfigKey(key))?.map { $0.trimmingSpaces() }
    }

    mutating func readableFile(_ key: String) -> String? {
        guard let path = text(key) else { return nil }
        guard access(path, R_OK) == 0 else {
            problem(key, "cannot read \(path): \(String(cString: strerror(errno)))")
            return nil
        }
        return path
    }
}
