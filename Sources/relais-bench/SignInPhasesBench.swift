import ArgumentParser
import RelaisHTTPClient

#if canImport(Glibc)
import Glibc
#endif
// Which module the compiler credits with `timespec` depends on what else the batch of files it
// compiles imported (Glibc's header or CoreFoundation's copy): both are imported so that either works.
#if canImport(CoreFoundation)
import CoreFoundation
#endif

/// Where a sign-in's CPU goes in Relais, step by step: sign-ins run in rounds, each step of a round
/// (/authorize, provider login, /callback, /token) taken by every sign-in of the round before the
/// next step starts, and the CPU time of Relais (and of the provider) read from /proc between steps.
/// The steps' sum is Relais' CPU per sign-in without the overlap of a free-running load.
struct SignInPhasesBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "signin-phases", abstract: "Relais' CPU per sign-in, step by step.")

    @Option(help: "Relais' base URL.") var relay: String
    @Option(help: "Relais' process id (its CPU time is read from /proc).") var pid: Int32
    @Option(help: "The development provider's process id.") var providerPID: Int32
    @Option(help: "Rounds to run.") var rounds = 300
    @Option(help: "Sign-ins per round, in flight at once.") var concurrency = 8
    @Option(help: "Write each step's start and end (CLOCK_MONOTONIC seconds) to this file, to cut a profile taken with `perf record -k CLOCK_MONOTONIC` by step.")
    var windows: String?

    /// The sign-in's steps, and two calibration steps taken the same way: a bare route (/healthz)
    /// and one Redis round trip (/readyz), so a step's cost can be read against them.
    enum Step: String, CaseIterable { case authorize, providerLogin = "provider_login", callback, token, healthz, readyz }

    func run() async throws {
        let signIn = try SignInBench.parse(["--relay", relay])
        let http = HTTPClient(configuration: .init(maxConcurrentRequests: concurrency * 2))
        for _ in 0..<concurrency { _ = try await signIn.signIn(http) }  // warm up
        var relayTicks: [Step: Int] = [:]
        var providerTicks: [Step: Int] = [:]
        var windowLines: [String] = []
        func timed<T: Sendable>(_ step: Step, _ work: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
            let relay0 = try cpuTicks(pid), provider0 = try cpuTicks(providerPID)
            let start = monotonicSeconds()
            defer { if windows != nil { windowLines.append("\(step.rawValue) \(start) \(monotonicSeconds())") } }
            let results = try await withThrowingTaskGroup(of: (Int, T).self) { group in
                for index in 0..<concurrency { group.addTask { (index, try await work(index)) } }
                return try await group.reduce(into: [(Int, T)]()) { $0.append($1) }.sorted { $0.0 < $1.0 }.map(\.1)
            }
            relayTicks[step, default: 0] += try cpuTicks(pid) - relay0
            providerTicks[step, default: 0] += try cpuTicks(providerPID) - provider0
            return results
        }
        for _ in 0..<rounds {
            let started = try await timed(.authorize) { _ in try await signIn.authorize(http) }
            let callbacks = try await timed(.providerLogin) { try await BenchProvider.development.login(http, authorizeURL: started[$0].providerURL) }
            let codes = try await timed(.callback) { try await signIn.callback(http, callbacks[$0]).code }
            _ = try await timed(.token) { try await signIn.token(http, code: codes[$0], verifier: started[$0].verifier) }
            for (step, path) in [(Step.healthz, "/healthz"), (.readyz, "/readyz")] {
                _ = try await timed(step) { _ in
                    let response = try await http.send(.init(url: relay + path))
                    guard response.status == 200 else { throw BenchError("\(path): HTTP \(response.status)") }
                }
            }
        }
        try await http.shutdown()
        if let windows {
            let text = windowLines.joined(separator: "\n") + "\n"
            guard let file = fopen(windows, "w") else { throw BenchError("cannot write \(windows)") }
            fputs(text, file)
            fclose(file)
        }
        let signIns = Double(rounds * concurrency)
        let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))
        func perSignIn(_ ticks: Int) -> String { String(((Double(ticks) * 1000 / hertz / signIns) * 1000).rounded() / 1000) }
        for step in Step.allCases {
            print("step=\(step.rawValue) relais_ms=\(perSignIn(relayTicks[step] ?? 0)) provider_ms=\(perSignIn(providerTicks[step] ?? 0))")
        }
        let signInSteps: [Step] = [.authorize, .providerLogin, .callback, .token]
        func total(_ ticks: [Step: Int]) -> Int { signInSteps.map { ticks[$0] ?? 0 }.reduce(0, +) }
        print("signins=\(Int(signIns)) relais_ms=\(perSignIn(total(relayTicks))) provider_ms=\(perSignIn(total(providerTicks)))")
    }

    private func monotonicSeconds() -> Double {
        var now = Glibc.timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// utime + stime of every thread of a process, in clock ticks (/proc/PID/stat fields 14 and 15).
    private func cpuTicks(_ pid: Int32) throws -> Int {
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY)
        guard descriptor >= 0 else { throw BenchError("cannot read /proc/\(pid)/stat") }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { throw BenchError("cannot read /proc/\(pid)/stat") }
        // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { throw BenchError("unexpected /proc/\(pid)/stat") }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): utime is field 14, stime field 15.
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { throw BenchError("unexpected /proc/\(pid)/stat") }
        return user + system
    }
}
