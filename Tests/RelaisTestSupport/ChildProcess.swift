#if canImport(Glibc)
public import Glibc
#endif

/// A child process started with posix_spawn, output discarded. Foundation's Process.waitUntilExit
/// can hang when called from a Swift concurrency thread on Linux; waitpid does not.
public struct ChildProcess: Sendable {
    public let pid: pid_t

    /// Starts `executable`; its standard output and error go to the given files (or nowhere), and
    /// `environment` entries are added to the current environment.
    public static func spawn(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        standardOutput: String = "/dev/null",
        standardError: String = "/dev/null"
    ) throws -> ChildProcess {
        try FastTests.refuse("starts \(executable)")
        var fileActions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fileActions)
        defer { posix_spawn_file_actions_destroy(&fileActions) }
        posix_spawn_file_actions_addopen(&fileActions, 1, standardOutput, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&fileActions, 2, standardError, O_WRONLY | O_CREAT | O_TRUNC, 0o644)

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
        var environmentEntries: [UnsafeMutablePointer<CChar>?] = []
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            let name = text.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            if environment[name] == nil { environmentEntries.append(strdup(text)) }
            pointer += 1
        }
        environmentEntries += environment.map { strdup("\($0.key)=\($0.value)") }
        environmentEntries.append(nil)
        defer { environmentEntries.forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &fileActions, &attributes, argv, environmentEntries)
        guard status == 0 else { throw ChildProcessError.spawnFailed(executable: executable, errno: status) }
        return ChildProcess(pid: pid)
    }

    public func signal(_ signal: Int32) { kill(pid, signal) }

    /// True once the process has exited (it is reaped then; `terminate` must not be called after).
    public func hasExited() -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == pid
    }

    /// Waits for the process to exit, at most `timeout`; its exit status, or nil if it still runs.
    /// Polls with `Task.sleep`: a blocking wait would hold one of the few concurrency threads (two
    /// on a 2-core machine) for as long as the child runs, and every other test's continuations
    /// would queue behind it (a 2 s timeout was once measured at 10.7 s that way).
    public func exitStatus(within timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        var status: Int32 = 0
        while true {
            // Checked once more after the deadline: a poller starved of its thread past the
            // deadline must not report a child that exited long ago as still running.
            let late = ContinuousClock.now >= deadline
            if waitpid(pid, &status, WNOHANG) == pid {
                return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            }
            if late { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Sends `signal` and reaps the process.
    public func terminate(with signal: Int32 = SIGTERM) {
        kill(pid, signal)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    }
}

public enum ChildProcessError: Error { case spawnFailed(executable: String, errno: Int32) }
