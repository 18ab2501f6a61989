import Metrics
public import RelaisConfig
import RelaisServer

#if canImport(Glibc)
import Glibc
#endif

/// Security events to standard output, standard error or a file opened for appending. Each line
/// is one write(2), as log lines are: events are a few per sign-in, and lines from concurrent
/// requests never interleave (O_APPEND keeps that true for a file shared with other writers).
public final class DescriptorEventSink: SecurityEventSink {
    private let descriptor: Int32
    private let owned: Bool

    /// - Throws: ``RelayStartupError`` when the file cannot be opened for appending.
    public init(_ output: RelaisConfiguration.SecurityEvents.Output) throws {
        switch output {
        case .standardOutput: (descriptor, owned) = (STDOUT_FILENO, false)
        case .standardError: (descriptor, owned) = (STDERR_FILENO, false)
        case .file(let path):
            let opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard opened >= 0 else {
                throw RelayStartupError("security_events.output: \(path) cannot be opened for appending: \(String(cString: strerror(errno)))")
            }
            (descriptor, owned) = (opened, true)
        }
    }

    public func write(_ line: String) {
        // A full disk or a closed pipe must not fail the request; the loss is counted for alerting.
        if !LogText.write(line, to: descriptor) { Counter(label: "relais_security_events_lost_total").increment() }
    }

    deinit { if owned { close(descriptor) } }
}
