#if canImport(Glibc)
public import Glibc
#endif

/// A child process started with posix_spawn, output discarded. Foundation's Process.waitUntilExit
/// can hang when called from a Swift concurrency thread on Linux; waitpid does not.
public struct ChildProcess: Sendable {
    public let pid: pid_t

    public static func spawn(_ executable: String, _ arguments: [String]) throws -> ChildProcess {
        var fileActions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fileActions)
        defer { posix_spawn_file_actions_destroy(&fileActions) }
        posix_spawn_file_actions_addopen(&fileActions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&fileActions, 2, "/dev/null", O_WRONLY, 0)

        // The calling thread may be a dispatch worker with most signals blocked; the child inherits
        // the mask unless told otherwise, and then ignores SIGTERM. Start it with a clean mask.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptySet = sigset_t()
        sigemptyset(&emptySet)
        var defaultSet = sigset_t()
        sigfillset(&defaultSet)
        posix_spawnattr_setsigmask(&attributes, &emptySet)
        posix_spawnattr_setsigdefault(&attributes, &defaultSet)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &fileActions, &attributes, argv, environ)
        guard status == 0 else { throw ChildProcessError.spawnFailed(executable: executable, errno: status) }
        return ChildProcess(pid: pid)
    }

    public func signal(_ signal: Int32) { kill(pid, signal) }

    /// Sends `signal` and reaps the process.
    public func terminate(with signal: Int32 = SIGTERM) {
        kill(pid, signal)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    }
}

public enum ChildProcessError: Error { case spawnFailed(executable: String, errno: Int32) }
