import ArgumentParser
import RelaisHTTPClient

/// Measures the libcurl client against a loopback server, with and without connection reuse, in
/// one run so the two figures share the same machine conditions. Driven by `make bench`.
@main
struct RelaisBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relais-bench",
        abstract: "Micro-benchmarks driven by `make bench`.",
        subcommands: [
            HTTPClientBench.self, JOSEBench.self, SignInBench.self, FormBench.self, SlowClientBench.self, MobileBench.self, AttestBench.self, SoakBench.self,
            AnchorSignInBench.self, SignInPhasesBench.self, OpenLoopBench.self,
        ]
    )
}

struct HTTPClientBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http-client",
        abstract: "libcurl client throughput against a loopback URL, keep-alive versus a new connection per request."
    )

    @Option(help: "URL to request (a fast loopback endpoint such as Relais' /healthz).")
    var url: String

    @Option(help: "Requests per mode.")
    var requests = 5000

    @Option(help: "Requests in flight at once (each on its own client worker thread).")
    var concurrency = 4

    @Flag(help: "Only the keep-alive mode (the one a relay uses with its providers).")
    var keepAliveOnly = false

    func run() async throws {
        for reuse in keepAliveOnly ? [true] : [true, false] {
            let client = HTTPClient(configuration: .init(reuseConnections: reuse, maxConcurrentRequests: concurrency))
            // Warm up: threads started, first connections open.
            for _ in 0..<concurrency * 4 { _ = try await client.send(.init(url: url)) }
            let start = ContinuousClock.now
            let (connections, failures) = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
                let perWorker = requests / concurrency
                for _ in 0..<concurrency {
                    group.addTask {
                        var opened = 0
                        var failed = 0
                        for _ in 0..<perWorker {
                            let response = try await client.send(.init(url: url))
                            opened += response.newConnections
                            if response.status != 200 { failed += 1 }
                        }
                        return (opened, failed)
                    }
                }
                return try await group.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
            }
            let elapsed = ContinuousClock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let total = requests / concurrency * concurrency
            print(
                "mode=\(reuse ? "reuse" : "fresh") requests=\(total) seconds=\(String(format3(seconds))) rps=\(Int(Double(total) / seconds)) new_connections=\(connections) non_200=\(failures)"
            )
            try await client.shutdown()
        }
    }
}

func format3(_ value: Double) -> String {
    let scaled = Int((value * 1000).rounded())
    let fraction = String(scaled % 1000)
    return "\(scaled / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
}
