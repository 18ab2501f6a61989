import NIOCore
import Synchronization

/// Opens connections: to the configured host, to one cluster node, or, with Sentinel, to the
/// master the sentinels name at that moment. Every new connection asks again, so after a
/// failover the node reaches the new master as soon as its old connections fail.
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
        node?.description ?? configuration.sentinel.map { "master '\($0.masterName)'" } ?? configuration.target
    }

    private static let role = [Array("ROLE".utf8)]

    private static func askMaster(_ sentinel: RedisConfiguration.Sentinel) -> [[UInt8]] {
        [Array("SENTINEL".utf8), Array("get-master-addr-by-name".utf8), Array(sentinel.masterName.utf8)]
    }

    /// A non-blocking connection on `loop`, ready for commands.
    func open(on loop: any EventLoop) async throws(RedisConnectionFailure) -> RedisChannelConnection {
        if let node { return try await RedisChannelConnection.open(configuration, address: (node.host, node.port), on: loop) }
        guard let sentinel = configuration.sentinel else { return try await RedisChannelConnection.open(configuration, on: loop) }
        let master = try await resolveMaster(sentinel, on: loop)
        let connection = try await RedisChannelConnection.open(configuration, address: master, on: loop)
        do throws(RedisConnectionFailure) {
            try Self.expectMaster(try await connection.command(Self.role, deadline: ContinuousClock.now + configuration.commandTimeout), master, sentinel)
        } catch {
            connection.close()
            throw error
        }
        return connection
    }

    private func resolveMaster(_ sentinel: RedisConfiguration.Sentinel, on loop: any EventLoop) async throws(RedisConnectionFailure) -> (host: String, port: Int) {
        var reasons: [String] = []
        let first = preferredSentinel.load(ordering: .relaxed)
        for offset in 0..<sentinel.nodes.count {
            let index = (first + offset) % sentinel.nodes.count
            let node = sentinel.nodes[index]
            do {
                let connection = try await RedisChannelConnection.connect(host: node.host, port: node.port, configuration: configuration, on: loop)
                defer { connection.close() }
                let deadline = ContinuousClock.now + configuration.commandTimeout
                try await connection.authenticate(username: sentinel.username, password: sentinel.password, deadline: deadline)
                switch Self.masterAddress(in: try await connection.command(Self.askMaster(sentinel), deadline: deadline), from: node, sentinel) {
                case .success(let address):
                    preferredSentinel.store(index, ordering: .relaxed)
                    return address
                case .failure(let reason):
                    reasons.append(reason.message)
                }
            } catch {
                reasons.append(error.message)
            }
        }
        throw Self.noMaster(reasons)
    }

    // MARK: - Replies

    private static func masterAddress(
        in reply: RedisReply, from node: RedisConfiguration.Node, _ sentinel: RedisConfiguration.Sentinel
    ) -> Result<(host: String, port: Int), RedisConnectionFailure> {
        func reason(_ text: String) -> Result<(host: String, port: Int), RedisConnectionFailure> {
            .failure(RedisConnectionFailure(message: "sentinel \(node): \(text)", isStaleConnection: false))
        }
        switch reply {
        case .array(let address):
            if address.count == 2, case .string(let host) = address[0], case .string(let portText) = address[1],
                let port = Int(String(decoding: portText, as: UTF8.self))
            {
                return .success((String(decoding: host, as: UTF8.self), port))
            }
            return reason("does not know the master '\(sentinel.masterName)'")
        case .null:
            return reason("does not know the master '\(sentinel.masterName)'")
        case .error(let message):
            return reason(message)
        default:
            return reason("unexpected reply")
        }
    }

    /// Sentinels may name the old master for a moment during a failover; writing to a node that
    /// is now a replica would fail anyway, so say why now.
    private static func expectMaster(_ role: RedisReply, _ master: (host: String, port: Int), _ sentinel: RedisConfiguration.Sentinel) throws(RedisConnectionFailure) {
        guard case .array(let fields) = role, case .string(let kind)? = fields.first, kind == Array("master".utf8) else {
            throw RedisConnectionFailure(
                message: "the sentinels named \(master.host):\(master.port) as master '\(sentinel.masterName)', but it is not a master (failover in progress?)",
                isStaleConnection: false
            )
        }
    }

    private static func noMaster(_ reasons: [String]) -> RedisConnectionFailure {
        RedisConnectionFailure(message: "no sentinel named a master: " + reasons.joined(separator: "; "), isStaleConnection: false)
    }
}
