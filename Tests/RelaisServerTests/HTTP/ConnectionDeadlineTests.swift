import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import RelaisTestSupport
import Testing

@testable import RelaisServer

/// The connection deadlines on an embedded channel whose clock the test moves, behind the same
/// HTTP/1 decoder as the server's (bytes in, so that a head can be trickled): header timeout from
/// a head's first byte on every request, body and keep-alive idle timeouts, and a busy kept-alive
/// connection that outlives both.
@Suite(.tags(.fast)) struct ConnectionDeadlineTests {
    /// A whole request without a body: its head and its end at once.
    private static let request = "GET /healthz HTTP/1.1\r\nHost: relais\r\n\r\n"

    private static func channel(header: Int64 = 5, idle: Int64 = 2) throws -> (EmbeddedChannel, EmbeddedEventLoop) {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try channel.pipeline.syncOperations.addHandler(ConnectionDeadlineHandler(headerTimeout: .seconds(header), idleTimeout: .seconds(idle)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, loop)
    }

    private static func send(_ channel: EmbeddedChannel, _ text: String) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    private static func answer(_ channel: EmbeddedChannel) throws {
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: "0"])))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        while try channel.readOutbound(as: ByteBuffer.self) != nil {}
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

    @Test func aTrickledFirstHeadIsCutAtTheHeaderTimeout() throws {
        let (channel, loop) = try Self.channel(header: 5, idle: 20)
        for byte in Self.request.prefix(4) {
            try Self.send(channel, String(byte))
            loop.advanceTime(by: .seconds(1))
        }
        // 4 s after opening, the head is still unfinished: cut at 5 s.
        Self.expectClosed(channel, loop, after: .seconds(1))
    }

    /// After a quick request, the next head is trickled: it is cut at the header timeout from its
    /// first byte, not at the idle timeout from the response (issue 33, finding 7).
    @Test func aTrickledHeadOnAKeptAliveConnectionIsCutAtTheHeaderTimeoutFromItsFirstByte() throws {
        let (channel, loop) = try Self.channel(header: 5, idle: 20)
        for round in 0..<3 {
            try Self.send(channel, Self.request)
            try Self.answer(channel)
            loop.advanceTime(by: .seconds(3))
            #expect(channel.isActive, "request \(round) was quick")
            guard round == 2 else { continue }
            // The third head starts 3 s after the response and goes on a byte a second.
            for byte in Self.request.prefix(4) {
                try Self.send(channel, String(byte))
                loop.advanceTime(by: .seconds(1))
            }
            Self.expectClosed(channel, loop, after: .seconds(1))
        }
    }

    @Test func aKeptAliveHeadSentInPiecesWithinTheHeaderTimeoutIsServed() throws {
        let (channel, loop) = try Self.channel(header: 5, idle: 20)
        try Self.send(channel, Self.request)
        try Self.answer(channel)
        loop.advanceTime(by: .seconds(10))
        try Self.send(channel, "GET /healthz HTT")
        loop.advanceTime(by: .seconds(4))
        try Self.send(channel, "P/1.1\r\nHost: relais\r\n\r\n")
        // Whole (at 14 s, before its deadline at 15 s) and being answered: no deadline until its response.
        loop.advanceTime(by: .seconds(30))
        #expect(channel.isActive)
        try Self.answer(channel)
        Self.expectClosed(channel, loop, after: .seconds(20))
    }

    @Test func aHeadBegunWhileTheLastRequestIsAnsweredHasTheHeaderTimeoutFromTheResponse() throws {
        let (channel, loop) = try Self.channel(header: 5, idle: 20)
        try Self.send(channel, Self.request)
        try Self.send(channel, "GET /heal")
        loop.advanceTime(by: .seconds(30))
        #expect(channel.isActive, "a slow answer is not cut")
        try Self.answer(channel)
        Self.expectClosed(channel, loop, after: .seconds(5))
    }

    @Test func aStalledBodyIsClosedAtTheIdleTimeoutAfterItsHead() throws {
        let (channel, loop) = try Self.channel()
        loop.advanceTime(by: .seconds(1))
        try Self.send(channel, "POST /token HTTP/1.1\r\nHost: relais\r\nContent-Length: 10\r\n\r\n")
        // The head moved the deadline from 5 s after connecting to 2 s after the head: 3 s.
        Self.expectClosed(channel, loop, after: .seconds(2))
    }

    /// A request answered before its body ended (413 from its declared length, before reading
    /// it): the body's end, drained after the response, leaves the idle deadline in place.
    @Test func aBodyEndingAfterItsResponseKeepsTheIdleTimeout() throws {
        let (channel, loop) = try Self.channel()
        try Self.send(channel, "POST /token HTTP/1.1\r\nHost: relais\r\nContent-Length: 4\r\n\r\n")
        try Self.answer(channel)
        loop.advanceTime(by: .seconds(1))
        try Self.send(channel, "abcd")
        // The response set the idle deadline: 2 s after it, 1 s from now.
        Self.expectClosed(channel, loop, after: .seconds(1))
    }

    @Test func noDeadlineWhileARequestIsAnsweredThenTheIdleTimeoutFromTheResponse() throws {
        let (channel, loop) = try Self.channel()
        try Self.send(channel, Self.request)
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
            try Self.send(channel, Self.request)
            try Self.answer(channel)
        }
        Self.expectClosed(channel, loop, after: .seconds(2))
    }

    @Test func aPipelinedSecondRequestKeepsTheConnectionOpenUntilItsResponse() throws {
        let (channel, loop) = try Self.channel()
        try Self.send(channel, Self.request)
        try Self.send(channel, Self.request)
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
