import ArgumentParser
import RelaisHTTPClient

#if canImport(Glibc)
import Glibc
#endif

/// Parsing the worst `application/x-www-form-urlencoded` bodies a client can send within the 64 KiB
/// limit: tens of thousands of tiny fields, all with one name or all distinct (refused at the
/// field limit), and the largest form accepted (1,000 distinct fields).
struct FormBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "form", abstract: "Form parsing time for 64 KiB worst-case bodies.")

    @Option(help: "Parses per body (the median is printed).")
    var rounds = 200

    func run() async throws {
        let limit = 64 * 1024
        var repeated = ""
        while repeated.utf8.count + 3 <= limit { repeated += "a=&" }
        var distinct = ""
        var index = 0
        while true {
            let next = "a\(index)=&"
            guard distinct.utf8.count + next.utf8.count <= limit else { break }
            distinct += next
            index += 1
        }
        let largestAccepted = (0..<FormParameters.maxFields).map { "a\($0)=" }.joined(separator: "&")
        let bodies = [("one name repeated", repeated), ("distinct names", distinct), ("largest accepted", largestAccepted)]
        for (name, body) in bodies {
            // What an endpoint does first: parse, and look for a repeated name.
            var samples: [Duration] = []
            var outcome = ""
            for _ in 0..<rounds {
                let start = ContinuousClock.now
                let form = FormParameters(encoded: body)
                _ = form?.firstRepeatedName
                samples.append(ContinuousClock.now - start)
                outcome = form.map { "parsed_fields=\($0.pairs.count)" } ?? "refused"
            }
            samples.sort()
            let fields = body.split(separator: "&").count
            print(
                "form=\"\(name)\" bytes=\(body.utf8.count) fields=\(fields) \(outcome) median_ms=\(format3(milliseconds(samples[samples.count / 2]))) max_ms=\(format3(milliseconds(samples.last!)))"
            )
        }
    }
}

/// `/healthz` latency on a fresh connection per request, with no other client, then while
/// `idle` connections sit open doing nothing and `trickling` ones send a request head a byte at a
/// time (slowloris). The relay must keep answering; its deadlines cut the hostile connections.
struct SlowClientBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "slow-clients", abstract: "/healthz latency beside idle and trickling connections.")

    @Option(help: "Relais' base URL.") var relay: String
    @Option(help: "Idle connections.") var idle = 3000
    @Option(help: "Trickling connections.") var trickling = 500
    @Option(help: "/healthz requests per phase.") var requests = 200
    @Option(help: "Seconds after opening them to count the connections the server has cut (its header_timeout plus a margin).") var cutAfter = 12

    func run() async throws {
        guard let port = Int(relay.split(separator: ":").last ?? "") else { throw ValidationError("--relay needs a port") }
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let quiet = try await latencies(port: port)
        print("phase=quiet \(quiet)")
        // Open the hostile connections, trickle on a thread of its own, measure meanwhile.
        let opened = ContinuousClock.now
        let sockets = (0..<(idle + trickling)).compactMap { _ in Self.connect(port) }
        let trickler = Trickler(descriptors: Array(sockets.suffix(trickling)))
        trickler.start()
        let loaded = try await latencies(port: port)
        try await Task.sleep(until: opened + .seconds(cutAfter))
        trickler.stop()
        let cut = sockets.filter(Self.isClosed).count
        print("phase=hostile opened=\(sockets.count) \(loaded) cut_by_server=\(cut)")
        for socket in sockets { close(socket) }
    }

    private func latencies(port: Int) async throws -> String {
        let client = HTTPClient(configuration: .init(reuseConnections: false, maxConcurrentRequests: 1))
        var samples: [Duration] = []
        var failures = 0
        for _ in 0..<requests {
            let start = ContinuousClock.now
            let response = try? await client.send(.init(url: relay + "/healthz"))
            samples.append(ContinuousClock.now - start)
            if response?.status != 200 { failures += 1 }
        }
        try await client.shutdown()
        samples.sort()
        let p50 = samples[samples.count / 2], p99 = samples[min(samples.count - 1, samples.count * 99 / 100)]
        return "requests=\(requests) failures=\(failures) p50_ms=\(format3(milliseconds(p50))) p99_ms=\(format3(milliseconds(p99)))"
    }

    static func connect(_ port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Whether the server closed the connection (whatever it sent first is read and dropped).
    static func isClosed(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count == 0 { return true }
            if count < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
        }
    }
}

/// Sends a valid request head a byte at a time, every 100 ms, on a thread of its own: the start
/// of a request line and a header, then one more byte of that header's value each time.
final class Trickler: @unchecked Sendable {
    private let descriptors: [Int32]
    private var thread = pthread_t()
    private var running = true

    init(descriptors: [Int32]) { self.descriptors = descriptors }

    func start() {
        let box = Unmanaged.passRetained(self)
        pthread_create(
            &thread, nil,
            { argument in
                let trickler = Unmanaged<Trickler>.fromOpaque(argument!).takeRetainedValue()
                let start = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
                for fd in trickler.descriptors { _ = start.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) } }
                var byte = UInt8(ascii: "a")
                while trickler.running {
                    for fd in trickler.descriptors { _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
                    usleep(100_000)
                }
                return nil
            }, box.toOpaque())
    }

    func stop() {
        running = false
        pthread_join(thread, nil)
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}
