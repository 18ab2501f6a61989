import Foundation
import RelaisTestSupport
import Testing

@testable import RelaisStore

#if canImport(Glibc)
import Glibc
#endif

/// OpenSSL keeps an error queue per thread. A TLS tunnel that fails leaves it empty, whichever
/// thread opened it: a later failure on that thread must not report this one's reason.
@Suite struct RedisTLSErrorQueueTests {
    /// Opens a tunnel on this thread, expecting a failure: its message, and what it left queued.
    private static func failedOpen(port: Int, tls: RedisConfiguration.TLS) -> (failure: String?, queued: [String]) {
        OpenSSLErrorQueue.clear()
        var failure: String?
        do {
            let (descriptor, _) = try RedisTLSTunnel.open(host: "127.0.0.1", port: port, tls: tls, connectTimeout: .seconds(2))
            Glibc.close(descriptor)
        } catch {
            failure = error.message
        }
        return (failure, OpenSSLErrorQueue.drain())
    }

    @Test func aFailedHandshakeLeavesTheThreadsErrorQueueEmpty() async throws {
        let certificates = try await TestCertificates.make()
        let server = try await RedisServerProcess.launch(tls: certificates)
        let plain = try PlainTextListener()
        let notPEM = FileManager.default.temporaryDirectory.appendingPathComponent("relais-not-pem-\(UUID().uuidString)").path
        try "not a certificate".write(toFile: notPEM, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: notPEM) }
        let trusted = RedisConfiguration.TLS(caBundlePath: certificates.serverCertificate)
        let cases: [(name: String, port: Int, tls: RedisConfiguration.TLS, failure: String)] = [
            ("a CA file that holds no certificate", server.port, RedisConfiguration.TLS(caBundlePath: notPEM), "cannot load the CA bundle"),
            ("a CA file that does not exist", server.port, RedisConfiguration.TLS(caBundlePath: notPEM + "-missing"), "cannot load the CA bundle"),
            (
                "a client certificate with another's key", server.port,
                RedisConfiguration.TLS(
                    caBundlePath: certificates.serverCertificate, clientCertificatePath: certificates.clientCertificate, clientKeyPath: certificates.serverKey),
                "cannot load the client certificate and key"
            ),
            ("a server the system's CAs do not know", server.port, RedisConfiguration.TLS(), "certificate verification failed"),
            (
                "a server under another name", server.port,
                RedisConfiguration.TLS(caBundlePath: certificates.serverCertificate, serverName: "redis.example.org"), "certificate verification failed"
            ),
            ("a server that does not speak TLS", plain.port, trusted, "handshake failed"),
        ]
        for row in cases {
            let (failure, queued) = Self.failedOpen(port: row.port, tls: row.tls)
            #expect(failure?.contains(row.failure) == true, "\(row.name): \(failure ?? "opened")")
            #expect(queued == [], "\(row.name)")
        }
        server.stop()
        withExtendedLifetime(plain) {}
    }
}

/// A loopback port whose server answers the first bytes of one connection with a line of text
/// and closes it, as a service that does not speak TLS would.
private final class PlainTextListener: @unchecked Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        descriptor = listening
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, length) == 0 && getsockname(listening, $0, &length) == 0 }
        }
        guard bound, listen(listening, 8) == 0 else {
            port = 0
            throw POSIXError(.EADDRINUSE)
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        // One connection, then the thread ends: it never calls accept on a descriptor number that
        // the listener's close has freed for another test's socket.
        Thread.detachNewThread {
            let connection = accept(listening, nil, nil)
            guard connection >= 0 else { return }  // the listener closed unused
            var buffer = [UInt8](repeating: 0, count: 512)
            _ = read(connection, &buffer, buffer.count)
            _ = "-ERR this is not TLS\r\n".withCString { write(connection, $0, strlen($0)) }
            Glibc.close(connection)
        }
    }

    deinit { shutdown(descriptor, Int32(SHUT_RDWR)); Glibc.close(descriptor) }
}
