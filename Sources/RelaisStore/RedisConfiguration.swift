import NIOCore
import RelaisCrypto

/// Where and how to reach Redis. Built from a `redis://` URL plus the timeout settings.
public struct RedisConfiguration: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// Redis 6 ACL user; nil uses the `default` user (plain `AUTH password`).
    public var username: String?
    public var password: String?
    public var database: Int
    public var connectTimeout: Duration
    /// Time allowed for one command's reply. A Redis that hangs fails calls after this, never later.
    public var commandTimeout: Duration
    /// Ignored, kept for one release so that configurations and callers that set it still work
    /// (`store.redis.pool_size` warns): the store has no pool since it runs on the event loops,
    /// one connection per loop and Redis server.
    public var poolSize: Int

    /// The former default pool size: the machine's cores (at least 2).
    public static var defaultPoolSize: Int { max(2, System.coreCount) }
    /// Prefix of every key Relais writes, so one Redis can serve several deployments.
    public var keyPrefix: String
    /// TLS to Redis (`rediss://`); nil for plain TCP.
    public var tls: TLS?
    /// Redis Sentinel: the master is asked of the sentinels instead of `host`/`port`.
    public var sentinel: Sentinel?

    /// Redis Cluster: the seed nodes asked for the slot map (any reachable one will do). The URL's
    /// host and port are then unused; its credentials and scheme apply to every node.
    public var cluster: [Node]?

    /// A Unix-domain socket (`unix:///run/redis/redis.sock`): a Redis on the same machine, spoken
    /// to without TCP, which costs both sides less per command. `host`, `port` and `tls` are then
    /// unused; Sentinel and Cluster, whose nodes are TCP addresses, do not use it (the
    /// configuration reader refuses a socket with either).
    public var socketPath: String?

    /// A server's address: `host[:port]` or `[ipv6]:port`.
    public struct Node: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// `host[:port]` or `[ipv6]:port`, the port defaulting to `defaultPort`.
        public init?(parsing text: String, defaultPort: Int) {
            var hostPart = Substring(text)
            var port = defaultPort
            if hostPart.hasPrefix("["), let close = hostPart.firstIndex(of: "]") {
                let rest = hostPart[hostPart.index(after: close)...]
                hostPart = hostPart[hostPart.index(after: hostPart.startIndex)..<close]
                if !rest.isEmpty {
                    guard rest.hasPrefix(":"), let value = Int(rest.dropFirst()) else { return nil }
                    port = value
                }
            } else if let colon = hostPart.lastIndex(of: ":") {
                guard let value = Int(hostPart[hostPart.index(after: colon)...]) else { return nil }
                port = value
                hostPart = hostPart[..<colon]
            }
            guard !hostPart.isEmpty, !hostPart.contains(where: \.isWhitespace), (1...65535).contains(port) else { return nil }
            self.init(host: String(hostPart), port: port)
        }
    }

    /// Where the sentinels are and which master they watch. The credentials are the sentinels'
    /// own (Redis' `username`/`password` stay for the master); TLS settings apply to both.
    public struct Sentinel: Sendable, Equatable {
        public typealias Node = RedisConfiguration.Node

        public var masterName: String
        public var nodes: [Node]
        public var username: String?
        public var password: String?

        public init(masterName: String, nodes: [Node], username: String? = nil, password: String? = nil) {
            self.masterName = masterName
            self.nodes = nodes
            self.username = username
            self.password = password
        }
    }

    /// How Relais speaks TLS to Redis: managed Redis services often require it.
    public struct TLS: Sendable, Equatable {
        /// Verify the server's certificate chain and name. Off only for development.
        public var verifyPeer: Bool
        /// PEM file of the CAs to trust; nil uses the system's store.
        public var caBundlePath: String?
        /// Client certificate and key (PEM) for Redis servers that require mutual TLS.
        public var clientCertificatePath: String?
        public var clientKeyPath: String?
        /// The name checked against the certificate and sent as SNI; nil uses the URL's host.
        public var serverName: String?

        public init(verifyPeer: Bool = true, caBundlePath: String? = nil, clientCertificatePath: String? = nil, clientKeyPath: String? = nil, serverName: String? = nil) {
            self.verifyPeer = verifyPeer
            self.caBundlePath = caBundlePath
            self.clientCertificatePath = clientCertificatePath
            self.clientKeyPath = clientKeyPath
            self.serverName = serverName
        }
    }

    public init(
        host: String = "127.0.0.1",
        port: Int = 6379,
        username: String? = nil,
        password: String? = nil,
        database: Int = 0,
        connectTimeout: Duration = .seconds(1),
        commandTimeout: Duration = .seconds(1),
        poolSize: Int = RedisConfiguration.defaultPoolSize,
        keyPrefix: String = "relais:",
        tls: TLS? = nil,
        sentinel: Sentinel? = nil,
        cluster: [Node]? = nil,
        socketPath: String? = nil
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.poolSize = poolSize
        self.keyPrefix = keyPrefix
        self.tls = tls
        self.sentinel = sentinel
        self.cluster = cluster
        self.socketPath = socketPath
    }

    /// Where the store's connections go, for logs and errors: never the credentials.
    public var target: String {
        socketPath.map { "unix:\($0)" } ?? Node(host: host, port: port).description
    }

    public enum URLError: Error, Equatable, CustomStringConvertible {
        case unsupportedScheme(String)
        case missingHost
        case invalidPort(String)
        /// Carries nothing of the text: `redis://pass/word@host` reads "word@host" as the database.
        case invalidDatabase
        case invalidSocketPath(String)
        case unsupportedQuery(String)
        case invalidEscape

        public var description: String {
            switch self {
            case .unsupportedScheme(let scheme):
                "unsupported scheme '\(scheme)' (expected redis://, rediss:// for TLS, or unix:///path/to/redis.sock for a Unix-domain socket)"
            case .missingHost: "the URL has no host"
            // Only digits are echoed: `redis://user:pa/ss@host` reads "pa" as a port.
            case .invalidPort(let port): port.allSatisfy(\.isASCII) && port.allSatisfy(\.isNumber) ? "invalid port '\(port)'" : "invalid port (not a number)"
            case .invalidDatabase: "invalid database index (expected a number, 0 or more, after the host: redis://host:6379/0; a '/' in a password is written %2F)"
            case .invalidSocketPath(let reason): "invalid Unix-domain socket: \(reason) (expected unix://[user[:password]@]/path/to/redis.sock[?db=N])"
            case .unsupportedQuery(let name): "unsupported parameter '\(name)' in the URL (only db=N, with unix://)"
            case .invalidEscape: "a %-escape in the URL is not two hexadecimal digits, or does not decode to UTF-8"
            }
        }
    }

    /// Reads `redis[s]://[user[:password]@]host[:port][/database]`; credentials may be
    /// percent-encoded. `rediss` turns TLS on (with default settings unless `tls` is already set),
    /// `redis` turns it off. Other settings keep their current values.
    /// `unix://[user[:password]@]/path/to/redis.sock[?db=N]` (also `redis+unix://`, the form
    /// redis-py and redis-rs read) reaches a Redis on this machine through its Unix-domain socket.
    /// A URL that is refused changes nothing.
    public mutating func apply(url: String) throws(URLError) {
        var read = self
        try read.read(url: url)
        self = read
    }

    private mutating func read(url: String) throws(URLError) {
        let schemeParts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        let scheme = schemeParts.count == 2 ? schemeParts[0].lowercased() : ""
        guard ["redis", "rediss", "unix", "redis+unix"].contains(scheme) else {
            throw .unsupportedScheme(schemeParts.count == 2 ? String(schemeParts[0]) : url.isEmpty ? "" : "none")
        }
        guard scheme == "redis" || scheme == "rediss" else { return try applySocket(schemeParts[1]) }
        socketPath = nil
        tls = scheme == "rediss" ? (tls ?? TLS()) : nil
        var rest = Substring(schemeParts[1])
        var path = ""
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[rest.index(after: slash)...])
            rest = rest[..<slash]
        }
        if let at = rest.lastIndex(of: "@") {
            try readCredentials(rest[..<at])
            rest = rest[rest.index(after: at)...]
        }
        var hostPart = rest
        if hostPart.hasPrefix("["), let close = hostPart.firstIndex(of: "]") {
            host = String(hostPart[hostPart.index(after: hostPart.startIndex)..<close])
            hostPart = hostPart[hostPart.index(after: close)...]
            if hostPart.hasPrefix(":") {
                let portText = String(hostPart.dropFirst())
                guard let value = Int(portText), (1...65535).contains(value) else { throw .invalidPort(portText) }
                port = value
            }
        } else if let colon = hostPart.lastIndex(of: ":") {
            let portText = String(hostPart[hostPart.index(after: colon)...])
            guard let value = Int(portText), (1...65535).contains(value) else { throw .invalidPort(portText) }
            port = value
            host = String(hostPart[..<colon])
        } else {
            host = String(hostPart)
        }
        guard !host.isEmpty else { throw .missingHost }
        let databaseText = path.split(separator: "?").first.map(String.init) ?? ""
        if !databaseText.isEmpty {
            guard let value = Int(databaseText), value >= 0 else { throw .invalidDatabase }
            database = value
        }
    }

    /// The part of a `unix://` URL after the scheme: credentials, an absolute path, `?db=N`.
    private mutating func applySocket(_ text: Substring) throws(URLError) {
        var rest = text
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let slash = rest.firstIndex(of: "/") else { throw .invalidSocketPath("the path must be absolute") }
        let credentials = rest[..<slash]
        if !credentials.isEmpty {
            // unix://host/path names a host, which a local socket has none of.
            // Not echoed: it may be a password whose `@` is missing.
            guard credentials.last == "@" else { throw .invalidSocketPath("the text before the path is not user[:password]@") }
            try readCredentials(credentials.dropLast())
        }
        let path = try Self.percentDecoded(rest[slash...])
        guard !path.utf8.contains(0) else { throw .invalidSocketPath("the path contains a NUL byte") }
        // sockaddr_un holds 108 bytes with the terminating zero.
        guard path.utf8.count <= 107 else { throw .invalidSocketPath("the path is longer than 107 bytes") }
        guard path.count > 1, !path.hasSuffix("/") else { throw .invalidSocketPath("the path names a directory, not a socket") }
        var database: Int?
        for parameter in query.isEmpty ? [] : query.split(separator: "&", omittingEmptySubsequences: false) {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            // Fail closed: db given twice, or a parameter Relais would ignore, refuses the URL.
            guard pair[0] == "db", pair.count == 2, database == nil else { throw .unsupportedQuery(String(pair[0])) }
            guard let value = Int(pair[1]), value >= 0 else { throw .invalidDatabase }
            database = value
        }
        if let database { self.database = database }
        socketPath = path
        tls = nil
    }

    /// `user:password`, `:password` or `password` (the conventional form for a password without a
    /// user), percent-encoded.
    private mutating func readCredentials(_ userInfo: Substring) throws(URLError) {
        if let colon = userInfo.firstIndex(of: ":") {
            let user = try Self.percentDecoded(userInfo[..<colon])
            username = user.isEmpty ? nil : user
            password = try Self.percentDecoded(userInfo[userInfo.index(after: colon)...])
        } else if !userInfo.isEmpty {
            password = try Self.percentDecoded(userInfo)
        }
    }

    /// Fails closed: a `%` not followed by two hexadecimal digits, or bytes that are not UTF-8,
    /// refuse the URL rather than reach Redis as some other password or path.
    private static func percentDecoded(_ text: Substring) throws(URLError) -> String {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Hex.value(of:)), let low = iterator.next().flatMap(Hex.value(of:)) else { throw .invalidEscape }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else { throw .invalidEscape }
        return decoded
    }
}
