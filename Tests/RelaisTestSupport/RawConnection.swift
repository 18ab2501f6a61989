import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to a loopback port, for what an HTTP client library will not do: send a
/// chunked body byte by byte, trickle a request head, or hold a connection open doing nothing.
///
/// Its calls block: from async code use ``blocking(_:)``, which runs them on a thread of their
/// own, so an in-process server that needs the concurrency pool to answer is not starved by its
/// client, and one test's long trickle does not queue another test's connection behind it (as a
/// shared pool of a thread per core would, on a two-core machine).
public final class RawConnection: @unchecked Sendable {
    /// Runs blocking socket work off the Swift concurrency pool, on a new thread.
    public static func blocking<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async throws -> Result {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }

    public let descriptor: Int32

    /// Connects to 127.0.0.1:`port`; nil when the connection is refused.
    public init?(port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        guard Self.withLoopback(port: port, { connect(fd, $0, $1) }) == 0 else {
            close(fd)
            return nil
        }
        descriptor = fd
    }

    deinit { close(descriptor) }

    /// Calls `body` (connect, bind) with the address 127.0.0.1:`port`.
    static func withLoopback(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Writes all of `text`; false once the server has closed the connection.
    @discardableResult
    public func send(_ text: String) -> Bool {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { Glibc.send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Sends `parts` one after the other, giving the server a few milliseconds after each to
    /// answer, and stops as soon as it does: a server that refuses a body early closes the
    /// connection, and more data sent after that would reset it and lose the answer. What the
    /// server sent.
    public func sendUntilAnswered(_ parts: [String], timeout: Duration = .seconds(5)) -> String {
        for part in parts {
            guard send(part) else { break }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 5) > 0 { break }
        }
        return receive(timeout: timeout)
    }

    /// Reads until the server closes the connection or `timeout` passes; what arrived.
    public func receive(timeout: Duration = .seconds(5)) -> String {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let left = deadline - ContinuousClock.now
            let milliseconds = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            guard poll(&poller, 1, milliseconds) > 0 else { break }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Reads one RESP reply (a simple or bulk string, or an integer), at most `timeout`; its text,
    /// or nil for an error reply, another type, or a reply cut short.
    func receiveReply(within timeout: Duration) -> String? {
        var received: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while ContinuousClock.now < deadline {
            if let lineEnd = received.firstIndex(of: UInt8(ascii: "\n")) {
                guard lineEnd >= 2, received[lineEnd - 1] == UInt8(ascii: "\r") else { return nil }  // a type byte, then the line and CRLF
                let line = String(decoding: received[1..<(lineEnd - 1)], as: UTF8.self)
                switch received[0] {
                case UInt8(ascii: "+"), UInt8(ascii: ":"): return line
                case UInt8(ascii: "$"):
                    guard let length = Int(line), length >= 0 else { return nil }
                    if received.count >= lineEnd + 1 + length + 2 { return String(decoding: received[(lineEnd + 1)..<(lineEnd + 1 + length)], as: UTF8.self) }
                default: return nil
                }
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) >= 0 else { return nil }
            guard poller.revents != 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return nil }
            received += buffer[0..<count]
        }
        return nil
    }

    /// Whether the server has closed the connection (a read returns end of file or an error now).
    public var isClosedByServer: Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) <= 0
    }
}
