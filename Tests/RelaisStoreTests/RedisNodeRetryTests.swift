import Logging
import NIOCore
import NIOPosix
import RelaisServer
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisStore

/// A scripted stand-in for Redis on loopback: it answers PONG to each PING, and closes a chosen
/// connection without answering at a chosen command, which a real Redis does only by accident
/// (a restart racing a command). Connections are numbered from 1 in the order accepted.
private final class ScriptedRedis: Sendable {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let accepted = Counter()
    private let received = Counter()
    private let channel: any Channel
    var port: Int { channel.localAddress?.port ?? 0 }
    var connections: Int { accepted.value.load(ordering: .relaxed) }
    /// Commands received, on every connection (the one it closes at included).
    var commands: Int { received.value.load(ordering: .relaxed) }

    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    /// `closeAt(connection)`: the command (from 1) at which that connection is closed unanswered.
    init(closeAt: @escaping @Sendable (Int) -> Int?) async throws {
        let (accepted, received) = (self.accepted, self.received)
        channel = try await ServerBootstrap(group: group).childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let number = accepted.value.add(1, ordering: .relaxed).newValue
                try channel.pipeline.syncOperations.addHandler(Handler(closeAt: closeAt(number), received: received))
            }
        }.bind(host: "127.0.0.1", port: 0).get()
    }

    func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let closeAt: Int?
        let received: Counter
        var commands = 0

        init(closeAt: Int?, received: Counter) { (self.closeAt, self.received) = (closeAt, received) }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            let text = buffer.readString(length: buffer.readableBytes) ?? ""
            for _ in 0..<text.split(separator: "PING", omittingEmptySubsequences: false).count - 1 {
                commands += 1
                received.value.add(1, ordering: .relaxed)
                // shutdown(2), not close(2): a redis-server another test spawns meanwhile may hold a
                // copy of the accepted socket (NIO does not mark it close-on-exec), and a close
                // would then send nothing to the client.
                if commands == closeAt { return context.close(mode: .output, promise: nil) }
                context.write(wrapOutboundOut(context.channel.allocator.buffer(string: "+PONG\r\n")), promise: nil)
            }
            context.flush()
        }
    }
}

/// The node's retries, against ``ScriptedRedis``: once on a fresh connection when one opened
/// before the call is closed unanswered, never for a connection opened for the call.
@Suite struct RedisNodeRetryTests {
    private static let ping: [[[UInt8]]] = [[Array("PING".utf8)]]

    private func node(_ redis: ScriptedRedis) -> RedisNode {
        var configuration = RedisConfiguration(connectTimeout: .seconds(1), commandTimeout: .seconds(10))
        configuration.port = redis.port
        return RedisNode(connector: RedisConnector(configuration: configuration), group: redis.group, logger: Logger(label: "test"))
    }

    @Test func aConnectionClosedUnansweredIsRetriedOnceOnAFreshOne() async throws {
        let redis = try await ScriptedRedis { $0 == 1 ? 2 : nil }  // the first connection dies at its second command
        let node = node(redis)
        try await withTaskExecutorPreference(EventLoopTaskExecutor(redis.group.next())) { () async throws in
            #expect(try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10), repeatable: true) == [.status("PONG")])
            #expect(try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10), repeatable: true) == [.status("PONG")])
        }
        #expect(redis.connections == 2)
        #expect(redis.commands == 3)
        try await node.shutdown()
        try await redis.stop()
    }

    /// The server may have run a command it was sent before it closed the connection (killed
    /// after running it): one that is not repeatable (a claim, a counter) is never sent twice,
    /// and its caller is told the store failed.
    @Test func aCommandThatIsNotRepeatableIsNotSentAgain() async throws {
        let redis = try await ScriptedRedis { $0 == 1 ? 2 : nil }  // the first connection dies at its second command
        let node = node(redis)
        try await withTaskExecutorPreference(EventLoopTaskExecutor(redis.group.next())) { () async throws in
            #expect(try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10)) == [.status("PONG")])
            await #expect { try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10)) } throws: { error in
                guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
                return reason.hasPrefix("connection closed")
            }
            // The next call opens a fresh connection, as after any close.
            #expect(try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10)) == [.status("PONG")])
        }
        #expect(redis.commands == 3)  // each sent once
        #expect(redis.connections == 2)
        try await node.shutdown()
        try await redis.stop()
    }

    @Test func theRetryIsOnlyOnce() async throws {
        let redis = try await ScriptedRedis { $0 == 1 ? 2 : 1 }  // then every new connection dies at once
        let node = node(redis)
        try await withTaskExecutorPreference(EventLoopTaskExecutor(redis.group.next())) { () async throws in
            _ = try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10), repeatable: true)
            await #expect(throws: StoreError.self) { try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10), repeatable: true) }
        }
        #expect(redis.connections == 2)
        try await node.shutdown()
        try await redis.stop()
    }

    @Test func aConnectionOpenedForTheCallIsNotRetried() async throws {
        let redis = try await ScriptedRedis { _ in 1 }  // every connection dies at its first command
        let node = node(redis)
        await #expect {
            try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10))
        } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.hasPrefix("connection closed")
        }
        #expect(redis.connections == 1)
        try await node.shutdown()
        try await redis.stop()
    }

    /// Calls that find their loop without a connection wait for the one being opened, and are
    /// then pipelined on it: one connection for all.
    @Test func concurrentCallsOnOneLoopShareOneConnect() async throws {
        let redis = try await ScriptedRedis { _ in nil }
        let node = node(redis)
        let answers = try await withTaskExecutorPreference(EventLoopTaskExecutor(redis.group.next())) {
            try await withThrowingTaskGroup(of: [RedisReply].self) { group in
                for _ in 0..<50 { group.addTask { try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10)) } }
                return try await group.reduce(into: [RedisReply]()) { $0 += $1 }
            }
        }
        #expect(answers == Array(repeating: .status("PONG"), count: 50))
        #expect(redis.connections == 1)
        try await node.shutdown()
        try await redis.stop()
    }

    /// A connect that fails fails every call waiting for it; the next call tries again.
    @Test func aFailedConnectFailsItsWaitersAndTheNextCallTriesAgain() async throws {
        let port = try FreePort.find()
        var configuration = RedisConfiguration(connectTimeout: .seconds(1), commandTimeout: .seconds(10))
        configuration.port = port
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let node = RedisNode(connector: RedisConnector(configuration: configuration), group: group, logger: Logger(label: "test"))
        let failures = try await withTaskExecutorPreference(EventLoopTaskExecutor(group.next())) {
            try await withThrowingTaskGroup(of: String?.self) { calls in
                for _ in 0..<10 {
                    calls.addTask {
                        do {
                            _ = try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10))
                            return nil
                        } catch StoreError.storeUnavailable(let reason) {
                            return reason
                        }
                    }
                }
                return try await calls.reduce(into: [String?]()) { $0.append($1) }
            }
        }
        #expect(failures.count == 10 && failures.allSatisfy { $0?.contains("cannot connect") == true })
        await #expect(throws: StoreError.self) { try await node.run(Self.ping, deadline: ContinuousClock.now + .seconds(10)) }
        try await node.shutdown()
        try await group.shutdownGracefully()
    }
}
