import CLibc
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A bare HTTP/1.1 server on loopback that sees what a router cannot: its connections. It counts
/// those accepted and the most open at once, and answers every request head with `answer` after
/// `delay` (the time a provider takes), closing the connection after each answer if asked to, or
/// resetting it (RST, no answer) when a second request arrives on it: a server that closed a
/// kept-alive connection just as the client reused it.
/// One blocking thread per connection: a test's handful.
final class CountingHTTPServer: Sendable {
    struct Counts {
        var accepted = 0
        var open = 0
        var maxOpen = 0
        var requests = 0
        var handling = 0
        var maxHandling = 0
    }

    let port: Int
    private let listener: Int32
    private let counts = Mutex(Counts())
    private let answer: String
    private let delay: Duration
    private let closeAfterEachAnswer: Bool
    private let resetSecondRequest: Bool

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var snapshot: Counts { counts.withLock { $0 } }

    static func ok(close: Bool) -> String {
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\(close ? "Connection: close\r\n" : "")\r\nok"
    }

    init(
        answer: String? = nil, delay: Duration = .zero, closeAfterEachAnswer: Bool = false, resetSecondRequest: Bool = false
    ) throws {
        self.answer = answer ?? Self.ok(close: closeAfterEachAnswer)
        self.delay = delay
        self.closeAfterEachAnswer = closeAfterEachAnswer
        self.resetSecondRequest = resetSecondRequest
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 128) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops accepting; connections still open end when their client closes them.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit { close(listener) }

    private func acceptLoop() {
        while true {
            // Close-on-exec from the start (accept4): a child process started meanwhile would
            // otherwise keep the connection open after this server closes it, and its client would
            // wait for an end that never comes (a redis-server another test started did, also
            // when the flag was set by a second call right after accept).
            let connection = relais_accept4(listener, nil, nil, Int32(SOCK_CLOEXEC.rawValue))
            guard connection >= 0 else {
                if errno == EINTR { continue }
                return
            }
            counts.withLock {
                $0.accepted += 1
                $0.open += 1
                $0.maxOpen = max($0.maxOpen, $0.open)
            }
            Thread.detachNewThread { [self] in serve(connection) }
        }
    }

    private func serve(_ connection: Int32) {
        defer {
            close(connection)
            counts.withLock { $0.open -= 1 }
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let endOfHead: [UInt8] = Array("\r\n\r\n".utf8)
        var answered = 0
        while true {
            guard let end = received.firstRange(of: endOfHead) else {
                let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                received += buffer[0..<count]
                continue
            }
            received.removeSubrange(..<end.upperBound)  // a body that follows is never read
            if resetSecondRequest, answered == 1 {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)  // close(2) then sends RST
                _ = setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                return
            }
            answered += 1
            counts.withLock {
                $0.requests += 1
                $0.handling += 1
                $0.maxHandling = max($0.maxHandling, $0.handling)
            }
            if delay > .zero { Thread.sleep(forTimeInterval: Double(delay.components.attoseconds) / 1e18 + Double(delay.components.seconds)) }
            let bytes = Array(answer.utf8)
            let sent = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            counts.withLock { $0.handling -= 1 }
            if sent != bytes.count || closeAfterEachAnswer { return }
        }
    }
}
