import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Loopback ports for test servers, built on plain sockets.
///
/// A port is chosen, then bound later by the server (a redis-server child, an in-process relay):
/// between the two, nothing holds it. Two things could take it in that window, and each made a
/// test fail once with "Address already in use":
/// - the kernel, as the source port of any outgoing connection, when the port is in the
///   ephemeral range (what binding port 0 gives): ports are chosen below that range;
/// - another test process choosing the same port (the suites of several checkouts run side by
///   side on one machine, and the set of ports handed out is per process): each port handed out
///   is reserved by an exclusive `flock` on `/tmp/relais-test-ports/<port>.lock`, held until
///   the test process exits (the kernel releases it even after a crash), so no other test
///   process is handed it meanwhile. A port is never handed out twice in one process either.
public enum FreePort {
    /// Ports handed out in this process, with the descriptor of the lock file reserving each.
    private static let reserved = Mutex<[Int: Int32]>([:])
    public static let lockDirectory = "/tmp/relais-test-ports"

    /// A free port for a test server on 127.0.0.1, below the kernel's ephemeral range, reserved
    /// for this process until it exits.
    public static func find() throws -> Int {
        try FastTests.refuse("takes a loopback port for a server")
        let firstEphemeral = ephemeralRangeStart()
        guard firstEphemeral > 12_000 else { throw FreePortError.noRoomBelowTheEphemeralRange(firstEphemeral) }
        prepareLockDirectory()
        for _ in 0..<500 {
            let port = Int.random(in: 10_000..<firstEphemeral)
            guard reserve(port) else { continue }
            if canBind(port) { return port }
            // Some other program listens there: keep it reserved (never tried again), go on.
        }
        throw FreePortError.noFreePort
    }

    /// Takes `port` for this process: false when this process or another test process has it.
    private static func reserve(_ port: Int) -> Bool {
        reserved.withLock { reserved in
            guard reserved[port] == nil else { return false }
            let fd = open("\(lockDirectory)/\(port).lock", O_CREAT | O_RDONLY | O_CLOEXEC, 0o644)
            guard fd >= 0 else { return false }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                close(fd)
                return false
            }
            reserved[port] = fd
            return true
        }
    }

    /// Shared by every user's test processes: world-writable and sticky, like /tmp.
    private static func prepareLockDirectory() {
        if mkdir(lockDirectory, 0o1777) == 0 { chmod(lockDirectory, 0o1777) }
    }

    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return RawConnection.withLoopback(port: port) { bind(fd, $0, $1) } == 0
    }

    /// The first port of `net.ipv4.ip_local_port_range` (32768 by default).
    static func ephemeralRangeStart() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
            let first = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap({ Int($0) })
        else { return 32_768 }
        return first
    }

    public static func isAccepting(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return RawConnection.withLoopback(port: port) { connect(fd, $0, $1) } == 0
    }
}

public enum FreePortError: Error {
    case noRoomBelowTheEphemeralRange(Int)
    case noFreePort
}
