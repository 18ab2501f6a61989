import Foundation
import RelaisTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Why "Address already in use" once failed a test, held shut at the cause (issue 33, finding 16):
/// a port chosen for a test server stays reserved against every other test process until this one
/// exits, it is never in the kernel's ephemeral range, and a cluster node's bus port is reserved
/// the same way instead of being the port + 10000 nobody reserved.
@Suite struct FreePortTests {
    /// Whether another open file description can lock `port`'s reservation, as another test process
    /// would try to (flock locks belong to the open file description, so this is that test).
    static func anotherProcessCouldTake(_ port: Int) -> Bool {
        let fd = open("\(FreePort.lockDirectory)/\(port).lock", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return true }
        defer { close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) == 0
    }

    static var firstEphemeralPort: Int {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? "32768"
        return text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { Int($0) } ?? 32_768
    }

    @Test func aPortHandedOutIsReservedAgainstOtherTestProcessesAndBelowTheEphemeralRange() throws {
        var seen = Set<Int>()
        for _ in 0..<50 {
            let port = try FreePort.find()
            #expect(seen.insert(port).inserted, "port \(port) handed out twice")
            #expect(port >= 10_000 && port < Self.firstEphemeralPort)
            #expect(!Self.anotherProcessCouldTake(port), "port \(port) is not reserved")
        }
    }

    @Test func aClusterNodesBusPortIsReservedToo() async throws {
        let node = try await RedisServerProcess.launch(extraArguments: ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"], clusterBus: true)
        defer { node.stop() }
        let nodes = try #require(await node.cli(["cluster", "nodes"]))
        let myself = try #require(nodes.split(whereSeparator: \.isNewline).first { $0.contains("myself") })
        // `id 127.0.0.1:port@busport flags …`
        let address = myself.split(separator: " ")[1]
        let bus = try #require(address.split(separator: "@").last.flatMap { Int($0.split(separator: ",")[0]) })
        #expect(bus != node.port + 10_000, "the bus port is Redis' default, which nobody reserved")
        #expect(bus >= 10_000 && bus < Self.firstEphemeralPort)
        #expect(!Self.anotherProcessCouldTake(bus) && !Self.anotherProcessCouldTake(node.port))
    }
}
