public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The loopback redirect of RFC 8252 §7.3 for terminal and desktop apps on Linux and macOS: a
/// listener on 127.0.0.1 and a port the system picks, `redirect_uri` `http://127.0.0.1:{port}{path}`
/// (Relais accepts any port for a registered `http://127.0.0.1/…` URI).
public struct LoopbackWebAuthenticator: WebAuthenticator {
    /// The path of the registered redirect URI (`/cb` for `http://127.0.0.1/cb`).
    public let path: String
    /// Opens the URL for the person: prints it, launches a browser, or (in tests) follows it.
    public let open: @Sendable (URL) async throws -> Void

    public init(path: String = "/cb", open: @escaping @Sendable (URL) async throws -> Void) {
        self.path = path
        self.open = open
    }

    public func begin() async throws -> any WebAuthenticationSession {
        try LoopbackRedirectListener(path: path, open: open)
    }
}

/// A listening socket that takes the first request for its path and answers it with a short page.
final class LoopbackRedirectListener: WebAuthenticationSession, @unchecked Sendable {
    private let socket: Int32
    private let path: String
    private let open: @Sendable (URL) async throws -> Void
    let port: Int
    private let closed = NSLock()
    private var isClosed = false

    var redirectURI: String { "http://127.0.0.1:\(port)\(path)" }

    init(path: String, open: @escaping @Sendable (URL) async throws -> Void) throws {
        self.path = path
        self.open = open
        #if canImport(Glibc)
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let descriptor = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        if descriptor >= 0 { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        #endif
        guard descriptor >= 0 else { throw RelaisKitError(.network, "cannot open a loopback socket (errno \(errno))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
        guard bound == 0, listen(descriptor, 8) == 0 else {
            close(descriptor)
            throw RelaisKitError(.network, "cannot listen on 127.0.0.1 (errno \(errno))")
        }
        var actual = sockaddr_in()
        var actualLength = length
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &actualLength) } }
        socket = descriptor
        port = Int(UInt16(bigEndian: actual.sin_port))
    }

    deinit { shut() }

    private func shut() {
        closed.locked {
            guard !isClosed else { return }
            isClosed = true
            #if canImport(Glibc)
            Glibc.shutdown(socket, Int32(SHUT_RDWR))
            #else
            Darwin.shutdown(socket, SHUT_RDWR)
            #endif
            close(socket)
        }
    }

    func run(authorizationURL: URL) async throws -> URL {
        defer { shut() }
        // Accepting before the browser opens (the redirect may come back before `open` returns),
        // on a thread started here: a task would start it only when a busy pool gets to it.
        let accepted = Accepted()
        Thread.detachNewThread { [self] in accepted.finish(Result { try acceptRedirect() }) }
        do {
            try await open(authorizationURL)
        } catch {
            shut()
            throw error
        }
        // Closing the socket ends the blocked accept, which finishes `accepted` as cancelled.
        return try await withTaskCancellationHandler {
            try await accepted.value()
        } onCancel: {
            shut()
        }
    }

    /// The accepting thread's result, for whichever comes first: the result or its waiter.
    private final class Accepted: @unchecked Sendable {
        private let lock = NSLock()
        private var result: Result<URL, any Error>?
        private var waiter: CheckedContinuation<URL, any Error>?

        func finish(_ outcome: Result<URL, any Error>) {
            let waiting = lock.locked { () -> CheckedContinuation<URL, any Error>? in
                result = outcome
                defer { waiter = nil }
                return waiter
            }
            waiting?.resume(with: outcome)
        }

        func value() async throws -> URL {
            try await withCheckedThrowingContinuation { continuation in
                let ready = lock.locked { () -> Result<URL, any Error>? in
                    if result == nil { waiter = continuation }
                    return result
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }

    /// Blocking: accepts connections until one asks for the redirect path.
    private func acceptRedirect() throws -> URL {
        while true {
            let client = accept(socket, nil, nil)
            guard client >= 0 else { throw RelaisKitError(.cancelled, "the sign-in was abandoned before the browser came back") }
            defer { close(client) }
            // Not inherited by a process the app starts meanwhile (accept4 is Linux only).
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            var request = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while request.count < 16384, !request.containsHeaderEnd {
                let count = recv(client, &buffer, buffer.count, 0)
                guard count > 0 else { break }
                request += buffer[0..<count]
            }
            let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
            // The path exactly (RFC 8252 §7.3), its query aside: `/cbX` or `/cb/x` is not the redirect.
            guard line.count >= 2, line[0] == "GET", line[1].prefix(while: { $0 != "?" }) == path, let url = URL(string: "http://127.0.0.1:\(port)" + line[1]) else {
                reply(client, status: "404 Not Found", "Not the sign-in redirect.")
                continue
            }
            reply(client, status: "200 OK", "Signed in: you can close this window and go back to the app.")
            return url
        }
    }

    private func reply(_ client: Int32, status: String, _ text: String) {
        let body = "<!doctype html><meta charset=utf-8><title>Relais</title><p>\(text)</p>"
        let answer = "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        _ = Array(answer.utf8).withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) }
    }
}

extension [UInt8] {
    fileprivate var containsHeaderEnd: Bool {
        guard count >= 4 else { return false }
        for index in 0...(count - 4) where self[index] == 13 && self[index + 1] == 10 && self[index + 2] == 13 && self[index + 3] == 10 { return true }
        return false
    }
}
