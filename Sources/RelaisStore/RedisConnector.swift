import Synchronization

/// Opens connections for the pool: to the configured host, to one cluster node, or, with
/// Sentinel, to the master the sentinels name at that moment. Every new connection asks again, so
/// after a failover the pool reaches the new master as soon as its old connections fail.
final class RedisConnector: Sendable {
    let configuration: RedisConfiguration
    /// A cluster node's address; nil for the configured host or Sentinel.
    let node: RedisConfiguration.Node?
    /// The sentinel that answered last is asked first next time: a dead sentinel costs one
    /// connect timeout once, not on every new connection.
    private let preferredSentinel = Atomic<Int>(0)

    init(configuration: RedisConfiguration, node: RedisConfiguration.Node? = nil) {
        self.configuration = configuration
        self.node = node
    }

    /// Where connections go, for logs and errors.
    var target: String {
        node?.description ?? configuration.sentinel.map { "master '\($0.masterName)'" } ?? RedisConfiguration.Node(host: configuration.host, port: configuration.port).description
    }

    /// Blocking: call it on a pool thread.
    func open() throws(RedisConnectionFailure) -> RedisConnection {
        if let node { return try RedisConnection.open(configuration, address: (node.host, node.port)) }
        guard let sentinel = configuration.sentinel else { return try RedisConnection.open(configuration) }
        let master = try resolveMaster(sentinel)
        let connection = try RedisConnection.open(configuration, address: master)
        // Sentinels may name the old master for a moment during a failover; writing to a node that
        // is now a replica would fail anyway, so say why now.
        let role = try connection.command([Array("ROLE".utf8)])
        guard case .array(let fields) = role, case .string(let kind)? = fields.first, kind == Array("master".utf8) else {
            throw RedisConnectionFailure(
                message: "the sentinels named \(master.host):\(master.port) as master '\(sentinel.masterName)', but it is not a master (failover in progress?)",
                isStaleConnection: false
            )
        }
        return connection
    }

    private func resolveMaster(_ sentinel: RedisConfiguration.Sentinel) throws(RedisConnectionFailure) -> (host: String, port: Int) {
        var reasons: [String] = []
        let first = preferredSentinel.load(ordering: .relaxed)
        for offset in 0..<sentinel.nodes.count {
            let index = (first + offset) % sentinel.nodes.count
            let node = sentinel.nodes[index]
            do {
                let connection = try RedisConnection.connect(host: node.host, port: node.port, configuration: configuration)
                try connection.authenticate(username: sentinel.username, password: sentinel.password)
                let reply = try connection.command([Array("SENTINEL".utf8), Array("get-master-addr-by-name".utf8), Array(sentinel.masterName.utf8)])
                switch reply {
                case .array(let address):
                    if address.count == 2, case .string(let host) = address[0], case .string(let portText) = address[1],
                        let port = Int(String(decoding: portText, as: UTF8.self))
                    {
                        preferredSentinel.store(index, ordering: .relaxed)
                        return (String(decoding: host, as: UTF8.self), port)
                    }
                    reasons.append("sentinel \(node): does not know the master '\(sentinel.masterName)'")
                case .null:
                    reasons.append("sentinel \(node): does not know the master '\(sentinel.masterName)'")
                case .error(let message):
                    reasons.append("sentinel \(node): \(message)")
                default:
                    reasons.append("sentinel \(node): unexpected reply")
                }
            } catch {
                reasons.append(error.message)
            }
        }
        throw RedisConnectionFailure(message: "no sentinel named a master: " + reasons.joined(separator: "; "), isStaleConnection: false)
    }
}
