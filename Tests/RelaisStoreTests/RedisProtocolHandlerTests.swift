import NIOCore
import NIOEmbedded
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisStore

#if canImport(Glibc)
import Glibc
#endif

/// The channel handler alone, on an `EmbeddedChannel`: what it writes, how it matches replies to
/// requests however the bytes arrive, and how each failure ends the connection.
@Suite(.tags(.fast)) struct RedisProtocolHandlerTests {
    private struct Setup {
        let channel = EmbeddedChannel()
        let loop: EmbeddedEventLoop

        init() throws {
            loop = channel.embeddedEventLoop
            try channel.pipeline.syncOperations.addHandler(RedisProtocolHandler())
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
        }

        /// `givingUpAfter`: the caller's own time, when sooner than the command timeout.
        func send(_ commands: [[String]], timeout: Duration = .seconds(60), givingUpAfter: Duration? = nil) -> EventLoopFuture<[RedisReply]> {
            RedisChannelConnection(channel: channel).send(
                commands.map { $0.map { Array($0.utf8) } }, deadline: ContinuousClock.now + timeout, givesUpAt: givingUpAfter.map { ContinuousClock.now + $0 })
        }

        func written() throws -> String {
            var text = ""
            while var buffer = try channel.readOutbound(as: ByteBuffer.self) { text += buffer.readString(length: buffer.readableBytes) ?? "" }
            return text
        }

        func receive(_ text: String) throws {
            try channel.writeInbound(channel.allocator.buffer(string: text))
        }

        /// The request's outcome now, nil while it waits.
        func outcome(_ future: EventLoopFuture<[RedisReply]>) -> Result<[RedisReply], any Error>? {
            nonisolated(unsafe) var result: Result<[RedisReply], any Error>?
            future.whenComplete { result = $0 }
            loop.run()
            return result
        }
    }

    @Test func commandsAreWrittenAsRESPWithBinaryValuesWhole() throws {
        let setup = try Setup()
        let value: [UInt8] = [0x61, 0x00, 0x0d, 0x0a]  // a NUL and a CRLF inside the value
        let reply = RedisChannelConnection(channel: setup.channel).send([[Array("SET".utf8), Array("k".utf8), value]], deadline: ContinuousClock.now + .seconds(60))
        var buffer = try #require(try setup.channel.readOutbound(as: ByteBuffer.self))
        #expect(buffer.readBytes(length: buffer.readableBytes) == Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\n".utf8) + value + Array("\r\n".utf8))
        try setup.receive("+OK\r\n")
        #expect(try setup.outcome(reply)?.get() == [.status("OK")])
        _ = try setup.channel.finish()
    }

    /// Replies that arrive one byte at a time complete each request once, in order, with its own replies.
    @Test func repliesFedByteByByteCompleteTheirRequestsInOrder() throws {
        let setup = try Setup()
        let first = setup.send([["GET", "a"], ["INCR", "n"]])
        let second = setup.send([["SMEMBERS", "s"]])
        let third = setup.send([["GET", "missing"], ["SET", "k", "v"]])
        #expect(
            try setup.written()
                == "*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*2\r\n$8\r\nSMEMBERS\r\n$1\r\ns\r\n*2\r\n$3\r\nGET\r\n$7\r\nmissing\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
        )
        let pieces = ["$5\r\nhello\r\n:42\r\n", "*2\r\n$1\r\nx\r\n$-1\r\n", "$-1\r\n-ERR no\r\n"]
        // Each request completes with the last byte of its own replies, not before.
        let lastBytes = pieces.indices.map { pieces[...$0].joined().utf8.count - 1 }
        var seen: [Int] = []
        var completedAt: [Int] = []
        for (index, byte) in pieces.joined().utf8.enumerated() {
            try setup.receive(String(decoding: [byte], as: UTF8.self))
            for (number, future) in [first, second, third].enumerated() where !seen.contains(number) && setup.outcome(future) != nil {
                seen.append(number)
                completedAt.append(index)
            }
        }
        #expect(completedAt == lastBytes)
        #expect(seen == [0, 1, 2])
        #expect(try setup.outcome(first)?.get() == [.string(Array("hello".utf8)), .integer(42)])
        #expect(try setup.outcome(second)?.get() == [.array([.string([UInt8(ascii: "x")]), .null])])
        #expect(try setup.outcome(third)?.get() == [.null, .error("ERR no")])
        #expect(setup.channel.isActive)
        _ = try setup.channel.finish()
    }

    @Test func aReplyNoRequestAskedForClosesTheConnection() throws {
        let setup = try Setup()
        try setup.receive("+OK\r\n")
        #expect(!setup.channel.isActive)
        // Whatever comes next fails at once (the handler may already be gone from the pipeline).
        #expect(Self.failure(setup.outcome(setup.send([["PING"]]))) != nil)
    }

    @Test func anUnreadableReplyFailsEveryWaitingRequestAndCloses() throws {
        let setup = try Setup()
        let first = setup.send([["GET", "a"]])
        let second = setup.send([["GET", "b"]])
        try setup.receive("!not resp\r\n")
        for future in [first, second] {
            let failure = Self.failure(setup.outcome(future))
            #expect(failure?.message.hasPrefix("unreadable reply from Redis") == true)
            #expect(failure?.isStaleConnection == false)
        }
        #expect(!setup.channel.isActive)
    }

    /// A bulk length announcing more than the reader holds for an incomplete reply: refused as
    /// the bytes come, not buffered until the announced end.
    @Test func aReplyOverTheReadersBoundIsRefused() throws {
        let reader = RedisReplyReader(maxPendingBytes: 1024)
        let header = Array("$100000000\r\n".utf8) + [UInt8](repeating: 0x61, count: 1000)
        try header.withUnsafeBytes { try reader.feed($0) }
        #expect(try reader.next() == nil)
        let more = [UInt8](repeating: 0x61, count: 100)
        #expect(throws: RedisReplyReader.ProtocolError.self) { try more.withUnsafeBytes { try reader.feed($0) } }
        // An array counts the elements already parsed too: hiredis holds them, not their bytes.
        let array = RedisReplyReader(maxPendingBytes: 1024)
        let element = Array("$100\r\n".utf8) + [UInt8](repeating: 0x61, count: 100) + Array("\r\n".utf8)
        let announced = Array("*100\r\n".utf8) + Array([[UInt8]](repeating: element, count: 100).joined())
        #expect(throws: RedisReplyReader.ProtocolError.self) {
            for start in stride(from: 0, to: announced.count, by: 64) {
                try announced[start..<min(start + 64, announced.count)].withUnsafeBytes { try array.feed($0) }
                _ = try array.next()
            }
        }
        // Under the bound, a whole reply of the same kind is read.
        let small = RedisReplyReader(maxPendingBytes: 1024)
        try Array("$3\r\nabc\r\n".utf8).withUnsafeBytes { try small.feed($0) }
        #expect(try small.next() == .string(Array("abc".utf8)))
        // The bound is per reply: arrays of 700 bytes one after another, fed in pieces, are read.
        let several = RedisReplyReader(maxPendingBytes: 1024)
        let reply = Array("*6\r\n".utf8) + Array([[UInt8]](repeating: element, count: 6).joined())
        let stream = Array([[UInt8]](repeating: reply, count: 10).joined())
        var read: [RedisReply] = []
        for start in stride(from: 0, to: stream.count, by: 64) {
            try stream[start..<min(start + 64, stream.count)].withUnsafeBytes { try several.feed($0) }
            while let next = try several.next() { read.append(next) }
        }
        #expect(read == Array(repeating: .array(Array(repeating: .string([UInt8](repeating: 0x61, count: 100)), count: 6)), count: 10))
    }

    /// A request unanswered for the command timeout closes the connection: a reply arriving later
    /// would be taken for the next request's. Every waiting request fails, none is retried as stale.
    @Test func aPassedCommandTimeoutFailsTheWaitingRequestsAndCloses() throws {
        let setup = try Setup()
        let slow = setup.send([["BLPOP", "q", "0"]], timeout: .milliseconds(100))
        let behind = setup.send([["GET", "a"]], timeout: .seconds(60))
        #expect(setup.outcome(slow) == nil)
        setup.loop.advanceTime(by: .milliseconds(200))
        for future in [slow, behind] {
            let failure = Self.failure(setup.outcome(future))
            #expect(failure?.message.contains("no reply within the command timeout") == true)
            #expect(failure?.isStaleConnection == false)
        }
        #expect(!setup.channel.isActive)
        // A request written after the close never reached Redis: safe to retry elsewhere.
        #expect(Self.failure(setup.outcome(setup.send([["GET", "a"]])))?.isStaleConnection == true)
    }

    /// A caller's deadline sooner than the command timeout fails that request alone. Its place in
    /// the queue stays, so that its late reply is dropped and the next request gets its own; the
    /// connection closes only if the command timeout passes unanswered.
    @Test func aCallersDeadlineFailsItsRequestAloneAndItsLateReplyIsDropped() throws {
        let setup = try Setup()
        let short = setup.send([["GET", "a"]], timeout: .seconds(1), givingUpAfter: .milliseconds(100))
        let behind = setup.send([["GET", "b"]], timeout: .seconds(1))
        setup.loop.advanceTime(by: .milliseconds(200))
        let failure = Self.failure(setup.outcome(short))
        #expect(failure?.message.contains("store budget") == true)
        #expect(failure?.isStaleConnection == false)
        #expect(setup.outcome(behind) == nil)
        #expect(setup.channel.isActive)
        try setup.receive("$1\r\nA\r\n$1\r\nB\r\n")
        #expect(try setup.outcome(behind)?.get() == [.string([UInt8(ascii: "B")])])
        setup.loop.advanceTime(by: .seconds(2))
        #expect(setup.channel.isActive)  // answered within the timeout: nothing left to close for

        // Unanswered for the command timeout, though, the connection closes under what waits behind it.
        let again = setup.send([["GET", "c"]], timeout: .seconds(1), givingUpAfter: .milliseconds(100))
        let waiting = setup.send([["GET", "d"]], timeout: .seconds(2))
        setup.loop.advanceTime(by: .milliseconds(200))
        #expect(Self.failure(setup.outcome(again))?.message.contains("store budget") == true)
        #expect(setup.channel.isActive)
        setup.loop.advanceTime(by: .seconds(1))
        #expect(Self.failure(setup.outcome(waiting))?.message.contains("no reply within the command timeout") == true)
        #expect(!setup.channel.isActive)
    }

    /// A reset (how a restarted Redis shows on an older connection) fails the waiting requests as
    /// stale, and closes.
    @Test func aResetFailsTheWaitingRequestsAsStaleAndCloses() throws {
        let setup = try Setup()
        let waiting = setup.send([["GET", "a"]])
        setup.channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read"))
        let failure = Self.failure(setup.outcome(waiting))
        #expect(failure?.isStaleConnection == true)
        #expect(failure?.message.hasPrefix("connection lost") == true)
        #expect(!setup.channel.isActive)
    }

    /// A request whose deadline passed before it was written fails alone, unsent: the
    /// connection and the requests already on it carry on.
    @Test func aRequestAlreadyLateIsNotSentAndTheConnectionStays() throws {
        let setup = try Setup()
        let waiting = setup.send([["GET", "a"]])
        _ = try setup.written()
        let late = setup.send([["GET", "b"]], timeout: .milliseconds(-1))
        #expect(try setup.written() == "")
        #expect(Self.failure(setup.outcome(late))?.message.contains("not sent") == true)
        try setup.receive("$1\r\n1\r\n")
        #expect(try setup.outcome(waiting)?.get() == [.string([UInt8(ascii: "1")])])
        #expect(setup.channel.isActive)
    }

    /// A close before any reply to a request marks it stale (safe to retry on a fresh connection);
    /// a request that got part of its replies is not.
    @Test func aCloseByRedisIsStaleOnlyForRequestsWithNoReplyYet() throws {
        let setup = try Setup()
        let partly = setup.send([["GET", "a"], ["GET", "b"]])
        let untouched = setup.send([["GET", "c"]])
        try setup.receive("$1\r\n1\r\n")
        setup.channel.pipeline.fireChannelInactive()
        #expect(Self.failure(setup.outcome(partly))?.isStaleConnection == false)
        let stale = Self.failure(setup.outcome(untouched))
        #expect(stale?.isStaleConnection == true)
        #expect(stale?.message == "connection closed by Redis")
    }

    @Test func aRequestOnAClosedConnectionFailsAtOnce() throws {
        let setup = try Setup()
        try setup.channel.close().wait()
        let failure = Self.failure(setup.outcome(setup.send([["PING"]])))
        #expect(failure?.isStaleConnection == true)
    }

    /// Subscriber mode: every reply is pushed, in order, and a write is done once written.
    @Test func inPushModeRepliesArePushedAndWritesDoNotWait() throws {
        let setup = try Setup()
        let pushed = Mutex<[RedisReply]>([])
        try setup.channel.triggerUserOutboundEvent(RedisPushMode { reply in pushed.withLock { $0.append(reply) } }).wait()
        #expect(try setup.outcome(setup.send([["SUBSCRIBE", "c"]]))?.get() == [])
        #expect(try setup.written() == "*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n")
        try setup.receive("*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$2\r\nhi\r\n")
        let bytes = { (text: String) in RedisReply.string(Array(text.utf8)) }
        #expect(
            pushed.withLock { $0 } == [
                .array([bytes("subscribe"), bytes("c"), .integer(1)]), .array([bytes("message"), bytes("c"), bytes("hi")]),
            ])
        #expect(setup.channel.isActive)
    }

    private static func failure(_ outcome: Result<[RedisReply], any Error>?) -> RedisConnectionFailure? {
        guard case .failure(let error)? = outcome else { return nil }
        return error as? RedisConnectionFailure
    }
}
