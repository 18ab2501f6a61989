import Foundation

/// A real Redis Cluster on loopback: `masters` redis-servers, each with `replicasPerMaster`
/// replicas, joined by `redis-cli --cluster create`. Failure detection is quick (1 s node timeout)
/// and a replica always stands for election, so a killed master is replaced in about 2–3 s.
public final class RedisClusterProcess: @unchecked Sendable {
    public let servers: [RedisServerProcess]

    private init(servers: [RedisServerProcess]) { self.servers = servers }

    /// Every node's address, as `store.redis.cluster` lists them.
    public var nodes: [String] { servers.map { "127.0.0.1:\($0.port)" } }

    public static func launch(masters: Int = 3, replicasPerMaster: Int = 1) async throws -> RedisClusterProcess {
        var servers: [RedisServerProcess] = []
        for _ in 0..<masters * (1 + replicasPerMaster) {
            servers.append(
                try await RedisServerProcess.launch(
                    extraArguments: [
                        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
                        // A replica that never finished its first sync does not stand for election: no delay.
                        "--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0",
                    ], clusterBus: true))
        }
        let cluster = RedisClusterProcess(servers: servers)
        do {
            guard
                await RedisServerProcess.cli(
                    port: servers[0].port,
                    ["--cluster", "create"] + cluster.nodes + ["--cluster-replicas", String(replicasPerMaster), "--cluster-yes"]
                ) != nil
            else { throw RedisServerError.notReady("redis-cli --cluster create failed") }
            try await cluster.waitUntilHealthy(masters: masters, replicas: masters * replicasPerMaster)
        } catch {
            cluster.stop()
            throw error
        }
        return cluster
    }

    deinit { stop() }

    public func stop() {
        for server in servers { server.stop() }
    }

    /// The server running on `port`.
    public func server(port: Int) -> RedisServerProcess? { servers.first { $0.port == port } }

    /// Masters as some live node sees them: port → slot ranges.
    public func masters() async -> [Int: [ClosedRange<Int>]] {
        for server in servers {
            guard let text = await server.query(["cluster", "nodes"]) else { continue }
            var masters: [Int: [ClosedRange<Int>]] = [:]
            for line in text.split(whereSeparator: \.isNewline) {
                let fields = line.split(separator: " ")
                guard fields.count >= 8, fields[2].split(separator: ",").contains("master"), !fields[2].contains("fail"),
                    let port = fields[1].split(separator: "@").first?.split(separator: ":").last.flatMap({ Int($0) })
                else { continue }
                masters[port] = fields.dropFirst(8).compactMap { range in
                    let bounds = range.split(separator: "-").compactMap { Int($0) }
                    return bounds.count == 2 ? bounds[0]...bounds[1] : bounds.count == 1 ? bounds[0]...bounds[0] : nil
                }
            }
            return masters
        }
        return [:]
    }

    /// The port of the master serving `slot`.
    public func masterPort(ofSlot slot: Int) async -> Int? {
        await masters().first { $0.value.contains { $0.contains(slot) } }?.key
    }

    /// Waits until every replica has received everything its master wrote so far.
    public func waitUntilReplicated(timeout: Duration = .seconds(10)) async throws {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < timeout {
            var behind = false
            for server in servers {
                guard let info = await server.query(["info", "replication"]), info.contains("role:master") else { continue }
                let lines = info.split(whereSeparator: \.isNewline)
                let offset = lines.first { $0.hasPrefix("master_repl_offset:") }?.split(separator: ":").last.map(String.init)
                let replicas = lines.filter { $0.hasPrefix("slave") && $0.contains("offset=") }
                if replicas.contains(where: { line in !line.split(separator: ",").contains { $0 == "offset=\(offset ?? "")" } }) { behind = true }
            }
            if !behind { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw RedisServerError.notReady("the replicas did not catch up")
    }

    /// Waits until some node reports every slot served by a healthy master, as many masters and
    /// replicas as expected, and every replica in sync.
    public func waitUntilHealthy(masters: Int, replicas: Int, timeout: Duration = .seconds(30)) async throws {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < timeout {
            if await isHealthy(masters: masters, replicas: replicas) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw RedisServerError.notReady("the cluster did not become healthy with \(masters) masters and \(replicas) replicas")
    }

    private func isHealthy(masters expectedMasters: Int, replicas expectedReplicas: Int) async -> Bool {
        var masters = 0
        var syncedReplicas = 0
        for server in servers {
            guard let info = await server.query(["info", "replication"]) else { continue }
            if info.contains("role:master") {
                guard await server.query(["cluster", "info"])?.contains("cluster_state:ok") == true else { return false }
                masters += 1
            } else if info.contains("master_link_status:up") {
                syncedReplicas += 1
            }
        }
        return masters == expectedMasters && syncedReplicas == expectedReplicas
    }
}
