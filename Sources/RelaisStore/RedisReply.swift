import CHiredis
import NIOCore

/// A reply from Redis, copied out of hiredis' buffers.
enum RedisReply: Equatable, Sendable {
    case string([UInt8])
    case status(String)
    case integer(Int64)
    case null
    case array([RedisReply])
    case error(String)

    /// Copies a reply made by hiredis' reader; the caller frees it.
    init(_ reply: UnsafeMutablePointer<redisReply>) {
        let value = reply.pointee
        switch value.type {
        case REDIS_REPLY_STRING:
            self = .string(Self.bytes(value.str, value.len))
        case REDIS_REPLY_STATUS:
            self = .status(String(decoding: Self.bytes(value.str, value.len), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            self = .error(String(decoding: Self.bytes(value.str, value.len), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(value.integer))
        case REDIS_REPLY_ARRAY:
            self = .array((0..<Int(value.elements)).map { RedisReply(value.element[$0]!) })
        default:
            self = .null
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ length: Int) -> [UInt8] {
        guard let pointer, length > 0 else { return [] }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }
}

/// Why a connection became unusable. The connection is discarded after any of these.
struct RedisConnectionFailure: Error {
    var message: String
    /// The server closed or reset the connection before answering: typical of a connection to a
    /// Redis that restarted. The command did not reach the new server, so a retry on a fresh
    /// connection reaches it; it may have reached the old one, though, just before it went.
    var isStaleConnection: Bool
    /// Nothing of the request was written: a retry cannot run it twice.
    var neverSent = false
}

/// hiredis as a codec only ("other libraries" API): commands formatted into RESP, replies parsed
/// from whatever bytes arrived. No socket and no blocking: safe on an event loop.
enum RedisCommandEncoding {
    /// Appends `arguments` as one RESP command; false when hiredis cannot allocate. Arguments go
    /// with explicit lengths (no C strings), so values holding NUL bytes are sent whole.
    static func append(_ arguments: [[UInt8]], to buffer: inout ByteBuffer) -> Bool {
        withArgv(arguments) { argc, argv, argvlen in
            var formatted: UnsafeMutablePointer<CChar>?
            let length = redisFormatCommandArgv(&formatted, argc, argv, argvlen)
            guard length >= 0, let formatted else { return false }
            defer { redisFreeCommand(formatted) }
            buffer.writeBytes(UnsafeRawBufferPointer(start: formatted, count: Int(length)))
            return true
        }
    }

    /// Calls `body` with argv/argvlen pointing into one flat copy of `arguments`.
    static func withArgv<Result>(
        _ arguments: [[UInt8]], _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int>?) -> Result
    ) -> Result {
        let flat = arguments.flatMap { $0 }
        let lengths = arguments.map { $0.count }  // a closure: `\.count` is a key path projected at run time, per argument
        return flat.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self)
            var offsets: [UnsafePointer<CChar>?] = []
            offsets.reserveCapacity(arguments.count)
            var offset = 0
            for length in lengths {
                offsets.append(base + offset)
                offset += length
            }
            return offsets.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in body(Int32(arguments.count), argv.baseAddress, argvlen.baseAddress) }
            }
        }
    }
}

/// hiredis' reply reader: bytes in, complete replies out, however the bytes were split.
///
/// Not `Sendable`: it belongs to one channel handler, used on its channel's event loop only.
final class RedisReplyReader {
    private let reader: UnsafeMutablePointer<redisReader>
    /// The most bytes of one reply not yet complete: those already parsed into its elements and
    /// those waiting. hiredis keeps whatever a bulk length announces coming, and builds an array
    /// as its elements come (an element of a few bytes costs it about 60 of memory); Relais'
    /// largest replies are a few hundred kilobytes (a batch of sessions, a person's index), so a
    /// server (or anything posing as one) sending more than this ends the connection instead of
    /// the memory.
    private let maxPendingBytes: Int
    /// Bytes hiredis has parsed into the reply it is still building.
    private var parsed = 0

    init(maxPendingBytes: Int = 16 << 20) {
        // Allocation failure here means the process is out of memory: nothing sensible to recover.
        reader = redisReaderCreate()!
        self.maxPendingBytes = maxPendingBytes
    }

    deinit { redisReaderFree(reader) }

    struct ProtocolError: Error {
        var message: String
    }

    func feed(_ bytes: UnsafeRawBufferPointer) throws(ProtocolError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count) == REDIS_OK else { throw error() }
        try checkBound()
    }

    private var unread: Int { reader.pointee.len - reader.pointee.pos }

    private func checkBound() throws(ProtocolError) {
        guard parsed + unread <= maxPendingBytes else { throw ProtocolError(message: "Redis sent a reply over \(maxPendingBytes) bytes") }
    }

    /// The next complete reply, or nil until more bytes come.
    func next() throws(ProtocolError) -> RedisReply? {
        var pointer: UnsafeMutableRawPointer?
        let before = unread
        guard redisReaderGetReply(reader, &pointer) == REDIS_OK else { throw error() }
        guard let pointer else {
            parsed += before - unread
            try checkBound()
            return nil
        }
        parsed = 0
        defer { freeReplyObject(pointer) }
        return RedisReply(pointer.assumingMemoryBound(to: redisReply.self))
    }

    private func error() -> ProtocolError {
        let text = withUnsafeBytes(of: reader.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return ProtocolError(message: "unreadable reply from Redis: \(text.isEmpty ? "protocol error" : text)")
    }
}
