import Foundation
import Synchronization

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

    /// When set, the server also listens on this Unix-domain socket (kept across restarts).
    public let socketPath: String?

    public var url: String { "\(tls == nil ? "redis" : "rediss")://127.0.0.1:\(port)" }
    /// The `unix://` URL of ``socketPath``.
    public var socketURL: String? { socketPath.map { "unix://\($0)" } }

    private init(port: Int, extraArguments: [String], tls: TestCertificates?, socketPath: String?) {
        self.port = port
        self.extraArguments = extraArguments
        self.tls = tls
        self.socketPath = socketPath
    }

    /// Starts a server on a port ``FreePort`` reserved for this test process (no other test
    /// process, of this checkout or another, is handed it while this one runs). With `tls`, the
    /// port speaks TLS only (server certificate for 127.0.0.1); `requireClientCertificate` asks
    /// clients for the test client certificate (mutual TLS). `clusterBus`: the node's cluster bus
    /// gets a reserved port of its own too (by default Redis takes the port + 10000, which no one
    /// reserved and which can fall in the kernel's ephemeral range). `unixSocket`: the server
    /// listens on a Unix-domain socket too, named after the reserved port.
    public static func launch(
        extraArguments: [String] = [], tls: TestCertificates? = nil, requireClientCertificate: Bool = false, clusterBus: Bool = false,
        unixSocket: Bool = false
    ) async throws -> RedisServerProcess {
        let port = try FreePort.find()
        var arguments = extraArguments
        // In /tmp itself, whatever TMPDIR says: short (a socket's path has at most 107 bytes) and
        // nothing in it to escape in the unix:// URL.
        let socketPath = unixSocket ? "/tmp/relais-redis-\(port).sock" : nil
        if let socketPath { arguments += ["--unixsocket", socketPath, "--unixsocketperm", "700"] }
        if clusterBus { arguments += ["--cluster-port", String(try FreePort.find())] }
        if let tls {
            arguments += [
                "--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.serverCertificate, "--tls-key-file", tls.serverKey,
                "--tls-ca-cert-file", tls.bundle, "--tls-auth-clients", requireClientCertificate ? "yes" : "no",
                // A replica reaches its master over TLS too.
                "--tls-replication", "yes",
            ]
        }
        let server = RedisServerProcess(port: port, extraArguments: arguments, tls: tls, socketPath: socketPath)
        do {
            try await server.start()
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    deinit { stop() }

    /// Starts redis-server on `port`. A restart may find the port still held for a moment (a
    /// child the killed server forked for replication lives on briefly with its listening socket):
    /// "Address already in use" is retried for up to 15 s; any other failure is reported at once.
    public func start() async throws {
        var attempts = 0
        while true {
            do {
                return try await startOnce()
            } catch RedisServerError.didNotStart(_, let why) where why.contains("Address already in use") && attempts < 75 {
                attempts += 1
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    private func startOnce() async throws {
        // Its own directory: a replica writes the RDB it receives there, never into the package.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relais-redis-\(port)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let process = try ChildProcess.spawn(
            Self.executable,
            [
                "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory,
                "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning", "--logfile", directory + "/redis.log",
                // A master with replicas waits up to 10 s on SIGTERM for them to catch up (Redis 7's
                // shutdown-timeout): `stop()` reaps the process, and that wait held a concurrency
                // thread (one of two on a 2-core machine) for seconds, stalling every other test.
                "--shutdown-timeout", "0",
            ] + extraArguments)
        lock.withLock { self.process = process }
        try await waitUntilAccepting(process, log: directory + "/redis.log")
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

    /// Runs `redis-cli` against this server (over TLS when it speaks TLS) and returns its output,
    /// or nil when it failed. For looking at the server from outside Relais (INFO, ROLE).
    public func cli(_ arguments: [String]) async -> String? {
        await RedisServerProcess.cli(port: port, tls: tls, arguments)
    }

    public static func cli(port: Int, tls: TestCertificates? = nil, _ arguments: [String]) async -> String? {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("relais-redis-cli-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let tlsArguments = tls.map { ["--tls", "--cacert", $0.serverCertificate] } ?? []
        guard let cli = try? ChildProcess.spawn("/usr/bin/redis-cli", tlsArguments + ["-h", "127.0.0.1", "-p", String(port)] + arguments, standardOutput: output),
            await cli.exitStatus(within: .seconds(20)) == 0
        else { return nil }
        return try? String(contentsOfFile: output, encoding: .utf8)
    }

    /// Sends one command over plain TCP and returns its reply as text: a bulk or simple string as
    /// is, an integer in decimal; nil for an error reply, a refused connection or no whole reply
    /// within 2 s. For the polling loops (a cluster coming up, replicas catching up): they ran
    /// redis-cli several times a second per node, and those process starts took a fifth of the store
    /// suite's CPU while other tests timed their calls. Plain servers only (a TLS one answers nil).
    public func query(_ arguments: [String]) async -> String? {
        guard tls == nil else { return nil }
        let request = "*\(arguments.count)\r\n" + arguments.map { "$\($0.utf8.count)\r\n\($0)\r\n" }.joined()
        return try? await RawConnection.blocking { [port] in
            guard let connection = RawConnection(port: port), connection.send(request) else { return nil }
            return connection.receiveReply(within: .seconds(2))
        }
    }

    /// Polls without blocking a concurrency thread; fails early if redis-server exited. Up to 10 s:
    /// a restart in AnnouncementTests missed 5 s once with three compilers beside the suite.
    /// A failure says why: whether redis-server exited or never accepted, and the end of its log.
    private func waitUntilAccepting(_ process: ChildProcess, log: String) async throws {
        func failure(_ what: String) -> RedisServerError {
            let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(5)
            return .didNotStart(port: port, why: what + (lines.isEmpty ? "" : "; its log ends: " + lines.joined(separator: " | ")))
        }
        for _ in 0..<400 {
            if process.hasExited() { throw failure("redis-server exited") }
            // Redis listens on TCP before it creates its Unix socket: both are waited for.
            if FreePort.isAccepting(port: port), socketPath.map(Self.isAccepting(socketPath:)) ?? true { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw failure("not accepting after 10 s")
    }

    private static func isAccepting(socketPath: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(socketPath.utf8.prefix(107)) + [0]
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    public static var executable: String {
        for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return "/usr/bin/redis-server"
    }
}

public enum RedisServerError: Error { case didNotStart(port: Int, why: String), notReady(String) }

/// A real Redis Sentinel (`redis-server FILE --sentinel`) on a free loopback port, watching one
/// master under `masterName` with quick failure detection (1 s), for failover tests.
public final class RedisSentinelProcess: @unchecked Sendable {
    public let port: Int
    public let masterName: String
    public let tls: TestCertificates?
    private let process: ChildProcess

    private init(port: Int, masterName: String, tls: TestCertificates?, process: ChildProcess) {
        self.port = port
        self.masterName = masterName
        self.tls = tls
        self.process = process
    }

    /// `redis-cli` against this sentinel (over TLS when it speaks TLS).
    public func cli(_ arguments: [String]) async -> String? {
        await RedisServerProcess.cli(port: port, tls: tls, arguments)
    }

    deinit { stop() }

    /// Starts a sentinel for `master` and waits until it has seen `replicas` replicas (a failover
    /// needs the sentinel to know a replica to promote).
    /// With the master's `tls`, the sentinel speaks only TLS, to its clients and to the servers.
    public static func launch(monitoring master: RedisServerProcess, masterName: String = "relais-master", replicas: Int) async throws -> RedisSentinelProcess {
        let port = try FreePort.find()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relais-sentinel-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = directory + "/sentinel.conf"
        let listen =
            master.tls.map {
                """
                port 0
                tls-port \(port)
                tls-cert-file \($0.serverCertificate)
                tls-key-file \($0.serverKey)
                tls-ca-cert-file \($0.bundle)
                tls-auth-clients no
                tls-replication yes
                """
            } ?? "port \(port)"
        try """
        \(listen)
        bind 127.0.0.1
        dir \(directory)
        sentinel monitor \(masterName) 127.0.0.1 \(master.port) 1
        sentinel down-after-milliseconds \(masterName) 1000
        sentinel failover-timeout \(masterName) 10000
        sentinel parallel-syncs \(masterName) 1

        """.write(toFile: file, atomically: true, encoding: .utf8)
        let process = try ChildProcess.spawn(RedisServerProcess.executable, [file, "--sentinel"], standardOutput: directory + "/log")
        let sentinel = RedisSentinelProcess(port: port, masterName: masterName, tls: master.tls, process: process)
        for _ in 0..<600 {
            if process.hasExited() { throw RedisServerError.didNotStart(port: port, why: "redis-server --sentinel exited (its log: \(directory)/log)") }
            // redis-cli prints each field name and value of each replica on its own line. A replica
            // the sentinel could promote is connected (flags exactly "slave") and has answered the
            // sentinel's INFO with a working link to its master.
            if let known = await RedisServerProcess.cli(port: port, tls: master.tls, ["sentinel", "replicas", masterName]) {
                let lines = known.split(whereSeparator: \.isNewline).map(String.init)
                let fields = zip(lines, lines.dropFirst())
                let connected = fields.filter { $0 == ("flags", "slave") }.count
                let linked = fields.filter { $0 == ("master-link-status", "ok") }.count
                if connected >= replicas && linked >= replicas { return sentinel }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw RedisServerError.notReady("the sentinel did not see \(replicas) replica(s) of \(masterName)")
    }

    /// The master's port as the sentinel names it now.
    public func masterPort() async -> Int? {
        await cli(["sentinel", "get-master-addr-by-name", masterName])?
            .split(whereSeparator: \.isNewline).last.flatMap { Int($0) }
    }

    public func stop() { process.terminate() }
}
