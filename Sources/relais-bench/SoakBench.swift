import ArgumentParser
import Glibc
import RelaisHTTPClient
import RelaisJOSE

/// Issue 15's soak: app instances that each signed in once, then refresh and call `/userinfo` flat
/// out (every refresh mints a new access token, which fills the verified-token cache), while the
/// relay's resident memory is read from /proc. Memory must stay bounded and flat after warm-up.
struct SoakBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "soak", abstract: "Refresh and /userinfo flat out, with the relay's resident memory over time.")

    @Option(help: "Relais' base URL.") var relay: String
    @Option(help: "The relay's process id (its VmRSS is sampled).") var pid: Int32
    @Option(help: "App instances, each with its own session.") var clients = 6
    @Option(help: "Seconds to run.") var seconds = 600
    @Option(help: "/userinfo calls per new access token.") var userinfo = 4
    @Option(help: "Seconds between memory samples.") var every = 10
    @Option(help: "Seconds of warm-up before the flatness window is judged from.") var warmUp = 30

    func run() async throws {
        let http = HTTPClient(configuration: .init(maxConcurrentRequests: clients * 2))
        let signIn = try SignInBench.parse(["--relay", relay])
        var sessions: [[String: String]] = []
        for _ in 0..<clients { sessions.append(try await signIn.signIn(http).tokens) }
        let counters = Counters()
        let start = ContinuousClock.now
        let deadline = start + .seconds(seconds)
        let startRSS = try residentKiB()
        let sampled = try await withThrowingTaskGroup(of: [Sample].self) { group in
            for tokens in sessions {
                group.addTask {
                    try await loop(http, tokens: tokens, until: deadline, counters: counters)
                    return []
                }
            }
            group.addTask {
                var samples: [Sample] = []
                var next = start
                while true {
                    next += .seconds(every)
                    guard next <= deadline else { return samples }
                    try await Task.sleep(until: next)
                    let second = Int((next - start).components.seconds)
                    let kib = try residentKiB()
                    let (refreshes, calls, errors) = await counters.totals
                    print("t=\(second) rss_kib=\(kib) refreshes=\(refreshes) userinfo=\(calls) errors=\(errors)")
                    samples.append(Sample(second: second, kib: kib))
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let samples = [Sample(second: 0, kib: startRSS)] + sampled.sorted { $0.second < $1.second }
        try await http.shutdown()
        let (refreshes, calls, errors) = await counters.totals
        let warm = samples.first { $0.second >= warmUp } ?? samples[samples.count - 1]
        let last = samples[samples.count - 1]
        // The last five minutes (or the second half of a shorter run).
        let windowStart = samples.first { $0.second >= max(warm.second, last.second - 300) } ?? warm
        let peak = samples.map(\.kib).max() ?? last.kib
        print(
            "summary seconds=\(seconds) clients=\(clients) refreshes=\(refreshes) userinfo=\(calls) errors=\(errors) tokens_per_second=\(refreshes / max(1, seconds)) "
                + "rss_start_kib=\(startRSS) rss_warm_kib=\(warm.kib) warm_at=\(warm.second) rss_end_kib=\(last.kib) rss_peak_kib=\(peak) "
                + "window_from=\(windowStart.second) window_growth_kib=\(last.kib - windowStart.kib)"
        )
    }

    private func loop(_ http: HTTPClient, tokens: [String: String], until deadline: ContinuousClock.Instant, counters: Counters) async throws {
        guard var refresh = tokens["refresh_token"] else { throw BenchError("no refresh token") }
        while ContinuousClock.now < deadline {
            let response = try await http.send(
                .form(
                    url: relay + "/token",
                    fields: [
                        ("grant_type", "refresh_token"), ("client_id", "bench-app"), ("refresh_token", refresh),
                    ]))
            guard response.status == 200, let object = JSONValue.object(from: response.body), let next = object["refresh_token"]?.stringValue,
                let access = object["access_token"]?.stringValue
            else {
                await counters.add(error: true)
                throw BenchError("refresh: HTTP \(response.status) \(response.bodyText.prefix(200))")
            }
            refresh = next
            await counters.add(refreshes: 1)
            for _ in 0..<userinfo {
                let answer = try await http.send(.init(url: relay + "/userinfo", headers: [("Authorization", "Bearer \(access)")]))
                await counters.add(calls: 1, error: answer.status != 200)
            }
        }
    }

    private func residentKiB() throws -> Int {
        guard let status = try? String(contentsOfProcFile: "/proc/\(pid)/status"),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { throw BenchError("cannot read the resident memory of process \(pid)") }
        return kib
    }

    struct Sample: Sendable {
        var second: Int
        var kib: Int
    }

    actor Counters {
        var refreshes = 0, calls = 0, errors = 0
        func add(refreshes: Int = 0, calls: Int = 0, error: Bool = false) {
            self.refreshes += refreshes
            self.calls += calls
            if error { errors += 1 }
        }
        var totals: (Int, Int, Int) { (refreshes, calls, errors) }
    }
}

extension String {
    /// A /proc file's text (their size reads as 0, so read until the end).
    init(contentsOfProcFile path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw BenchError("cannot open \(path)") }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        self.init(decoding: bytes, as: UTF8.self)
    }
}
