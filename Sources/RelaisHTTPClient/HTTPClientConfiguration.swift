/// How Relais talks to the outside world (providers' token, userinfo and JWKS endpoints).
///
/// The defaults are the safe ones: TLS verification on, redirects off, a bounded response size.
public struct HTTPClientConfiguration: Sendable, Equatable {
    /// Time allowed to establish the TCP (and TLS) connection.
    public var connectTimeout: Duration
    /// Time allowed for the whole exchange, connection included. A request may shorten it.
    public var totalTimeout: Duration
    /// A response whose body, or whose header lines together, are larger than this is abandoned
    /// with ``HTTPClientError/responseTooLarge(limit:)``.
    public var maxResponseBytes: Int
    /// Redirects are a way to smuggle a request elsewhere: off unless a deployment needs them.
    public var followRedirects: Bool
    public var maxRedirects: Int
    /// Keep connections open between requests to the same host (HTTP keep-alive).
    public var reuseConnections: Bool
    /// Transfers in flight at once, and connections open at once (idle ones kept for reuse
    /// included); further requests wait their turn, each still within its own timeout. Per engine:
    /// a client given an event loop group has one per loop, so this bounds each loop's load on
    /// providers, not threads.
    public var maxConcurrentRequests: Int
    public var tls: TLS
    /// Outbound proxy URL (`http://proxy.example:3128`), as government networks often require.
    public var proxy: String?
    /// Comma-separated hosts that bypass the proxy (curl's `NO_PROXY` syntax).
    public var noProxy: String?
    public var userAgent: String

    public struct TLS: Sendable, Equatable {
        /// Verify the peer's certificate chain and host name. Turning it off is refused by the
        /// configuration checker outside development; it exists for local test providers.
        public var verifyPeer: Bool
        /// PEM bundle of trusted CAs, replacing the system store.
        public var caBundlePath: String?
        /// Client certificate (PEM) and key for mutual TLS with the provider.
        public var clientCertificatePath: String?
        public var clientKeyPath: String?
        public var clientKeyPassword: String?

        public init(
            verifyPeer: Bool = true,
            caBundlePath: String? = nil,
            clientCertificatePath: String? = nil,
            clientKeyPath: String? = nil,
            clientKeyPassword: String? = nil
        ) {
            self.verifyPeer = verifyPeer
            self.caBundlePath = caBundlePath
            self.clientCertificatePath = clientCertificatePath
            self.clientKeyPath = clientKeyPath
            self.clientKeyPassword = clientKeyPassword
        }
    }

    public init(
        connectTimeout: Duration = .seconds(3),
        totalTimeout: Duration = .seconds(10),
        maxResponseBytes: Int = 1 << 20,
        followRedirects: Bool = false,
        maxRedirects: Int = 3,
        reuseConnections: Bool = true,
        maxConcurrentRequests: Int = 16,
        tls: TLS = TLS(),
        proxy: String? = nil,
        noProxy: String? = nil,
        userAgent: String = "Relais"
    ) {
        self.connectTimeout = connectTimeout
        self.totalTimeout = totalTimeout
        self.maxResponseBytes = maxResponseBytes
        self.followRedirects = followRedirects
        self.maxRedirects = maxRedirects
        self.reuseConnections = reuseConnections
        self.maxConcurrentRequests = maxConcurrentRequests
        self.tls = tls
        self.proxy = proxy
        self.noProxy = noProxy
        self.userAgent = userAgent
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a sub-millisecond timeout never becomes "no timeout" (0).
    var roundedUpMilliseconds: Int {
        let (seconds, attoseconds) = components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int(max(1, milliseconds))
    }
}
