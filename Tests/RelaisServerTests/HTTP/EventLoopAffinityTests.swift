import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import RelaisTestSupport
import Testing

@testable import RelaisServer

/// Where a request's handler runs: on the event loop that read the request, before and after its
/// awaits, so that a request that waits on no I/O never changes thread (docs/capacity.md).
@Suite struct EventLoopAffinityTests {
    /// What the probe route saw: the event loop it ran on at each step (nil: not on a loop thread).
    struct Trace: Codable, Equatable {
        var loops: [String?]
        var stayedOnOneLoop: Bool { loops.count > 1 && loops.allSatisfy { $0 != nil && $0 == loops[0] } }
    }

    static func currentLoop() -> String? {
        MultiThreadedEventLoopGroup.currentEventLoop.map { "\(ObjectIdentifier($0).hashValue)" }
    }

    /// The route's steps: plain awaits, a yield (the task is enqueued again), a child task, an
    /// actor, and a timer (a wait that resumes from another thread, as an I/O completion does).
    static func probe<Context: RequestContext>(_ router: Router<Context>) {
        router.get("/probe/loop") { _, _ -> Response in
            var loops = [currentLoop()]
            await Task.yield()
            loops.append(currentLoop())
            loops.append(
                await withTaskGroup(of: String?.self) { group in
                    group.addTask { currentLoop() }
                    return await group.next() ?? nil
                })
            loops.append(await Counter().next())
            try await Task.sleep(for: .milliseconds(1))
            loops.append(currentLoop())
            let body = try JSONEncoder().encode(Trace(loops: loops))
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
    }

    actor Counter {
        func next() -> String? { EventLoopAffinityTests.currentLoop() }
    }

    /// Three requests on one keep-alive connection: the second and later ones too.
    static func traces(from client: some TestClientProtocol) async throws -> [Trace] {
        var traces: [Trace] = []
        for _ in 0..<3 {
            try await client.execute(uri: "/probe/loop", method: .get) { response in
                #expect(response.status == .ok)
                traces.append(try decode(Trace.self, response.body))
            }
        }
        return traces
    }

    @Test func relaisHandlesEachRequestOnTheLoopThatReadIt() async throws {
        try await withApplication(testing: .live, routes: { router, _ in Self.probe(router) }) { client in
            for trace in try await Self.traces(from: client) {
                #expect(trace.stayedOnOneLoop, "the handler changed thread: \(trace.loops)")
            }
        }
    }

    /// The check can fail: Hummingbird's own HTTP/1 server runs handlers on Swift's global executor.
    @Test func withoutTheExecutorPreferenceTheSameRouteLeavesTheLoop() async throws {
        try FastTests.refuse("serves over loopback")
        for (server, expected) in [(HTTPServerBuilder.http1(), false), (HTTPServerBuilder.http1OnEventLoops(configuration: .init()), true)] {
            let router = Router()
            Self.probe(router)
            let app = Application(router: router, server: server, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: quietLogger())
            try await app.test(.live) { client in
                for trace in try await Self.traces(from: client) {
                    #expect(trace.stayedOnOneLoop == expected, "\(trace.loops)")
                    if !expected { #expect(trace.loops.contains(nil), "\(trace.loops)") }
                }
            }
        }
    }
}
