public import Logging
public import RelaisHTTPClient
public import RelaisStore

/// Everything `relais serve` needs, validated. Every key is documented in config/relais.example.yaml.
public struct RelaisConfiguration: Sendable {
    public var server: Server
    public var log: Log
    public var store: Store
    public var httpClient: HTTPClientConfiguration
    public var metrics: Metrics
    public var providers: [ProviderSettings] = []
    public var apps: [AppSettings] = []
    public var resourceServers: [ResourceServerSettings] = []
    public var keys = RelayKeySettings()
    public var relay = RelaySettings()
    public var forwardAuth = ForwardAuthSettings()
    public var rateLimit = RateLimitSettings()
    public var wellKnown = WellKnownSettings()
    public var memory = MemorySettings()
    /// How Relais' own pages (errors, device approval, confirmations) look and speak (`pages.*`).
    public var pages = PagesSettings()
    /// The credential of `POST /admin/sessions/revoke` (`admin.token_file`); nil: the endpoint is off.
    public var adminToken: String?
    public var securityEvents = SecurityEvents()
    /// Start-up warnings from loading (settings set aside, not refused).
    public var warnings: [String] = []

    public enum Environment: String, Sendable, CaseIterable {
        /// Safe defaults are enforced: https public URL, TLS verification on.
        case production
        /// Loosens the checks that local providers and laptops need.
        case development
    }

    public struct Server: Sendable, Equatable {
        public var environment: Environment = .production
        public var host: String = "127.0.0.1"
        public var port: Int = 8080
        /// The URL apps and providers reach Relais at, behind any load balancer.
        public var publicBaseURL: String = "http://127.0.0.1:8080"
        public var maxBodyBytes: Int = 64 * 1024
        /// How long SIGTERM waits for in-flight requests before closing connections.
        public var drainTimeout: Duration = .seconds(20)
        /// Load balancers whose `X-Forwarded-For` is believed (CIDR networks). Empty: none.
        public var trustedProxies: [String] = []
        /// A connection's first request head must be complete within this (slowloris).
        public var headerTimeout: Duration = .seconds(10)
        /// A kept-alive connection waits this long for its next request; a body must be complete
        /// within this of its head.
        public var idleTimeout: Duration = .seconds(60)
        /// Open connections at most; nil: from the process's descriptor limit.
        public var maxConnections: Int?
        public init() {}
    }

    public enum LogFormat: String, Sendable, CaseIterable {
        case text
        /// One JSON object per line, for log shippers.
        case json
    }

    public struct Log: Sendable, Equatable {
        public var level: Logger.Level = .info
        public var format: LogFormat = .text
        public init() {}
    }

    /// The security event log (docs/security-events.md): JSON lines for a SIEM, apart from the log.
    public struct SecurityEvents: Sendable, Equatable {
        public enum Output: Sendable, Equatable {
            case standardOutput, standardError
            /// Appended to; created if missing (mode 0600).
            case file(String)
        }
        public var enabled = true
        public var output = Output.standardOutput
        /// The key of the `sid` and `sub` hashes (`security_events.hash_key_file`). Nil: a random
        /// key kept in the store and shared by the instances (lost with the store's data).
        public var hashKey: [UInt8]?
        public init() {}
    }

    public enum StoreKind: String, Sendable, CaseIterable {
        case redis
        case embedded
    }

    public struct Store: Sendable, Equatable {
        public var kind: StoreKind = .redis
        public var redis = RedisConfiguration()
        /// The time one request may wait on the store across all its calls (see `StoreBudget`).
        public var requestBudget: Duration = .seconds(1)
        public init() {}
    }

    public struct Metrics: Sendable, Equatable {
        public var enabled = true
        /// Serve `/metrics` on its own listener (`metrics.listen: 127.0.0.1:9090`) instead of the
        /// public port.
        public var listenHost: String?
        public var listenPort: Int?
        /// Require `Authorization: Bearer <this>` (`metrics.bearer_token_file`).
        public var bearerToken: String?
        public init() {}
    }

    public init() {
        server = Server()
        log = Log()
        store = Store()
        httpClient = HTTPClientConfiguration()
        metrics = Metrics()
    }
}
