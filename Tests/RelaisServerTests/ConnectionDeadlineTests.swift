import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
@testable import RelaisServer
import Testing

/// The connection deadlines on an embedded channel whose clock the test moves: header timeout,
/// body and keep-alive idle timeouts, and a busy kept-alive connection that outlives both.
@Suite struct ConnectionDeadlineTests {
    private static let head = HTTPRequestPart.head(HTTPRequest(method: .get, scheme: "http", authority: "relais", path: "/healthz"))

    private static func channel(header: Int64 = 5, idle: Int64 = 2) throws -> (EmbeddedChannel, EmbeddedEventLoop) {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.addHandler(ConnectionDeadlineHandler(headerTimeout: .seconds(header), idleTimeout: .seconds(idle)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, loop)
    }

    private static func answer(_ channel: EmbeddedChannel) throws {
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
    }

    /// The channel is still open 1 ms before `after` has passed, and closed when it has.
    private static func expectClosed(_ channel: EmbeddedChannel, _ loop: EmbeddedEventLoop, after: TimeAmount, sourceLocation: SourceLocation = #_sourceLocation) {
        loop.advanceTime(by: after - .milliseconds(1))
        #expect(channel.isActive, "closed before its deadline", sourceLocation: sourceLocation)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive, "still open at its deadline", sourceLocation: sourceLocation)
    }

    @Test func aConnectionThatSendsNothingIsClosedAtTheHeaderTimeout() throws {
        let (channel, loop) = try Self.channel()
        Self.expectClosed(channel, loop, after: .seconds(5))
    }

    @Test func aStalledBodyIsClosedAtTheIdleTimeoutAfterItsHead() throws {
        let (channel, loop) = try Self.channel()
        loop.advanceTime(by: .seconds(1))
        try channel.writeInbound(Self.head)
        // The head moved the deadline from 5 s after connecting to 2 s after the head: 3 s.
        Self.expectClosed(channel, loop, after: .seconds(2))
    }

    @Test func noDeadlineWhileARequestIsAnsweredThenTheIdleTimeoutFromTheResponse() throws {
        let (channel, loop) = try Self.channel()
        try channel.writeInbound(Self.head)
        try channel.writeInbound(HTTPRequestPart.end(nil))
        // A slow handler (bounded by its own budgets) is not cut by the connection deadlines.
        loop.advanceTime(by: .seconds(30))
        #expect(channel.isActive)
        try Self.answer(channel)
        Self.expectClosed(channel, loop, after: .seconds(2))
    }

    @Test func aBusyKeptAliveConnectionOutlivesEveryTimeoutThenIdlesOut() throws {
        let (channel, loop) = try Self.channel(header: 5, idle: 2)
        // Twenty requests, one every 1.5 s: 30 s in all, past the header timeout and many idle
        // timeouts; each response moves the deadline, which the timer finds when it fires.
        for _ in 0..<20 {
            loop.advanceTime(by: .milliseconds(1_500))
            #expect(channel.isActive)
            try channel.writeInbound(Self.head)
            try channel.writeInbound(HTTPRequestPart.end(nil))
            try Self.answer(channel)
        }
        Self.expectClosed(channel, loop, after: .seconds(2))
    }

    @Test func aPipelinedSecondRequestKeepsTheConnectionOpenUntilItsResponse() throws {
        let (channel, loop) = try Self.channel()
        try channel.writeInbound(Self.head)
        try channel.writeInbound(HTTPRequestPart.end(nil))
        try channel.writeInbound(Self.head)
        try channel.writeInbound(HTTPRequestPart.end(nil))
        try Self.answer(channel)
        // One response is out, one request still answered: no deadline.
        loop.advanceTime(by: .seconds(30))
        #expect(channel.isActive)
        try Self.answer(channel)
        loop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
    }

    @Test func removingTheHandlerCancelsItsTimer() throws {
        let (channel, loop) = try Self.channel()
        let handler = try channel.pipeline.syncOperations.handler(type: ConnectionDeadlineHandler.self)
        try channel.pipeline.syncOperations.removeHandler(handler).wait()
        loop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
    }
}
