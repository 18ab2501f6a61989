import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` on 127.0.0.1 and a free port, owned by one test.
///
/// No persistence, no other clients: each test gets a clean server and stops it afterwards.
/// `restart()` keeps the port, which is what a Relais instance sees when its Redis restarts.
public final class RedisServerProcess: @unchecked Sendable {
    public let port: Int
    private let extraArguments: [String]
    /// When set, the server speaks only TLS on `port` with these certificates.
    public let tls: TestCertificates?
    private let lock = NSLock()
    private var process: ChildProcess?

    public var url: String { "\(tls == nil ? "redis" : "rediss")://127.0.0.1:\(port)" }

    private init(port: Int, extraArguments: [String], tls: TestCertificates?) {
        self.port = port
        self.extraArguments = extraArguments
        self.tls = tls
    }

    /// Starts a server on a free port. A port another process grabbed in the meantime makes
    /// redis-server exit at once; a new port is tried then. With `tls`, the port speaks TLS only
    /// (server certificate for 127.0.0.1); `requireClientCertificate` asks clients for the test
    /// client certificate (mutual TLS).
    public static func launch(extraArguments: [String] = [], tls: TestCertificates? = nil, requireClientCertificate: Bool = false) async throws -> RedisServerProcess {
        var lastError: any Error = RedisServerError.didNotStart(port: 0)
        for _ in 0..<5 {
            let port = try FreePort.find()
            var arguments = extraArguments
            if let tls {
                arguments += [
                    "--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.serverCertificate, "--tls-key-file", tls.serverKey,
                    "--tls-ca-cert-file", tls.clientCertificate, "--tls-auth-clients", requireClientCertificate ? "yes" : "no",
                ]
            }
            let server = RedisServerProcess(port: port, extraArguments: arguments, tls: tls)
            do {
                try await server.start()
                return server
            } catch {
                server.stop()
                lastError = error
            }
        }
        throw lastError
    }

    deinit { stop() }

    public func start() async throws {
        let process = try ChildProcess.spawn(Self.executable, [
            "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning",
        ] + extraArguments)
        lock.withLock { self.process = process }
        try await waitUntilAccepting(process)
    }

    /// Stops the server (SIGKILL when `abruptly`, as a crash would) and waits for it to exit.
    public func stop(abruptly: Bool = false) {
        let running = lock.withLock { () -> ChildProcess? in
            defer { self.process = nil }
            return self.process
        }
        running?.terminate(with: abruptly ? SIGKILL : SIGTERM)
    }

    /// Freezes the server (SIGSTOP): connections stay open but nothing answers, like a hung Redis.
    public func pause() {
        lock.withLock { process }?.signal(SIGSTOP)
    }

    public func resume() {
        lock.withLock { process }?.signal(SIGCONT)
    }

    public func restart() async throws {
        stop(abruptly: true)
        try await start()
    }

    /// Polls without blocking a concurrency thread; fails early if redis-server exited.
    private func waitUntilAccepting(_ process: ChildProcess) async throws {
        for _ in 0..<200 {
            if process.hasExited() { throw RedisServerError.didNotStart(port: port) }
            if FreePort.isAccepting(port: port) { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw RedisServerError.didNotStart(port: port)
    }

    public static var executable: String {
        for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/bin/redis-server"
    }
}

public enum RedisServerError: Error { case didNotStart(port: Int) }

/// Loopback port helpers built on plain sockets.
public enum FreePort {
    /// A port the kernel just handed out for 127.0.0.1 and that is closed again.
    public static func find() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RedisServerError.didNotStart(port: 0) }
        defer { close(fd) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw RedisServerError.didNotStart(port: 0) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    public static func isAccepting(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
