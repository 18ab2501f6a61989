import ArgumentParser
import CLibc
// Not used as such: with epoll's header in CLibc, glibc's `timespec` is attributed to the first
// module that included it, CoreFoundation's (MobileBench imports Foundation), and its members
// need that module imported here.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// GET requests at a fixed rate whatever the answers do (open loop), due at evenly spaced instants
/// and spread over keep-alive connections; a request's latency counts from the instant it was due,
/// so one that waited for a free connection counts its wait (no coordinated omission).
///
/// Why not h2load's `--rps`: its clients' timers start together and stay in step, so 32 clients at
/// 375 requests a second each send bursts of 32 every 2.7 ms, and the last of each burst waits for
/// the 31 before it. On this project's 2-core machine `/healthz` (no I/O) then had a p99 of 3.0 ms
/// at 12,000 a second over 32 clients, 0.33 ms at the same rate over 2 (2026-11-29): the figure
/// measured the bursts. Here one thread sends every request when it is due (a `timerfd` at the
/// instant, nanosecond resolution) on whichever connection is free, and reads every answer as it
/// comes (`epoll`).
struct OpenLoopBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open-loop",
        abstract: "Latency of GET requests sent at a fixed, evenly spaced rate (open loop) over keep-alive connections."
    )

    @Option(help: "URL to request: http://127.0.0.1:PORT/PATH.") var url: String
    @Option(help: "Requests a second, due at evenly spaced instants.") var rate: Int
    @Option(help: "Seconds measured.") var seconds = 10
    @Option(help: "Seconds sent first and not measured (connections warm, caches filled).") var warmUp = 1
    @Option(help: "Keep-alive connections the requests are spread over.") var connections = 32
    @Option(name: .customLong("header"), help: "A request header, \"Name: value\" (repeatable).") var headers: [String] = []

    func validate() throws {
        guard rate > 0, seconds > 0, warmUp >= 0, connections > 0 else { throw ValidationError("--rate, --seconds and --connections must be positive") }
        guard Self.target(of: url) != nil else { throw ValidationError("--url must be http://127.0.0.1:PORT/PATH") }
        guard headers.allSatisfy({ $0.contains(":") && !$0.contains("\r") && !$0.contains("\n") }) else {
            throw ValidationError("--header takes \"Name: value\" on one line")
        }
    }

    /// The port and path of an `http://127.0.0.1:PORT/PATH` URL (loopback only).
    static func target(of url: String) -> (port: UInt16, path: String)? {
        let prefix = "http://127.0.0.1:"
        guard url.hasPrefix(prefix) else { return nil }
        let rest = url.dropFirst(prefix.count)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let port = UInt16(rest[..<slash]), port > 0 else { return nil }
        return (port, slash == rest.endIndex ? "/" : String(rest[slash...]))
    }

    func run() throws {
        let (port, path) = Self.target(of: url)!
        let head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n" + headers.map { "\($0)\r\n" }.joined() + "\r\n"
        var load = try OpenLoop(port: port, request: Array(head.utf8), connections: connections)
        let result = try load.run(rate: rate, warmUp: warmUp, seconds: seconds)
        print(result.summary(seconds: seconds))
        if result.failures > 0 || result.non2xx > 0 { throw ExitCode.failure }
    }
}

/// The sending and reading loop of `open-loop`, on the calling thread.
struct OpenLoop {
    struct Connection {
        var fd: Int32
        var buffer: [UInt8] = []
        /// When the request in flight was due (monotonic ns); nil when the connection is free.
        var due: UInt64?
    }

    struct Result {
        var latencies: [UInt64] = []  // ns, of the requests due in the measured seconds
        var non2xx = 0
        var failures = 0
        /// Requests that found every connection busy and waited for one.
        var waited = 0

        func summary(seconds: Int) -> String {
            let sorted = latencies.sorted()
            func at(_ fraction: Double) -> String {
                guard !sorted.isEmpty else { return "-" }
                return format3(Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]) / 1e6)
            }
            let perSecond = format3(Double(latencies.count) / Double(seconds))
            return "requests=\(latencies.count) per_second=\(perSecond) p50_ms=\(at(0.5)) p99_ms=\(at(0.99)) p999_ms=\(at(0.999)) "
                + "max_ms=\(at(1)) non_2xx=\(non2xx) failures=\(failures) waited=\(waited)"
        }
    }

    let port: UInt16
    let request: [UInt8]
    var pool: [Connection]
    var free: [Int] = []
    var backlog: [UInt64] = []
    var backlogHead = 0
    var result = Result()
    var measureFrom: UInt64 = 0
    var inFlight = 0
    var poller: Int32 = -1
    /// One buffer for every read.
    var chunk = [UInt8](repeating: 0, count: 65_536)

    init(port: UInt16, request: [UInt8], connections: Int) throws {
        self.port = port
        self.request = request
        pool = []
        for index in 0..<connections {
            pool.append(Connection(fd: try Self.connect(port)))
            free.append(index)
        }
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    static func connect(_ port: UInt16) throws -> Int32 {
        guard let fd = SlowClientBench.connect(Int(port)) else { throw BenchError("cannot connect to 127.0.0.1:\(port): errno \(errno)") }
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    mutating func run(rate: Int, warmUp: Int, seconds: Int) throws -> Result {
        let timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        guard timer >= 0 else { throw BenchError("timerfd_create: errno \(errno)") }
        defer { close(timer) }
        // epoll, not poll: a wake-up costs what is ready, not what is open (the generator shares
        // the cores with what it measures). Each descriptor's event carries its pool index + 1
        // (0: the timer); a reconnection registers its new descriptor under the same index.
        poller = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard poller >= 0 else { throw BenchError("epoll_create1: errno \(errno)") }
        defer { close(poller) }
        try watch(timer, as: 0)
        for index in pool.indices { try watch(pool[index].fd, as: UInt64(index + 1)) }
        let start = Self.now() + 10_000_000
        measureFrom = start + UInt64(warmUp) * 1_000_000_000
        let end = measureFrom + UInt64(seconds) * 1_000_000_000
        let interval = 1e9 / Double(rate)
        var sent: UInt64 = 0
        func due(_ index: UInt64) -> UInt64 { start + UInt64((Double(index) * interval).rounded()) }
        try arm(timer, at: due(0))
        var events = [epoll_event](repeating: epoll_event(), count: pool.count + 1)
        while true {
            let scheduling = due(sent) < end
            if !scheduling && inFlight == 0 && backlogHead == backlog.count { break }
            if !scheduling && Self.now() > end + 5_000_000_000 {
                result.failures += pool.filter { $0.due != nil }.count + (backlog.count - backlogHead)  // no answer within 5 s
                break
            }
            let ready = epoll_wait(poller, &events, Int32(events.count), scheduling ? -1 : 100)
            guard ready >= 0 || errno == EINTR else { throw BenchError("epoll_wait: errno \(errno)") }
            for event in events.prefix(Int(max(ready, 0))) {
                let tag = Int(event.data.u64)
                guard tag == 0 else {
                    try receive(on: tag - 1)
                    continue
                }
                var expirations: UInt64 = 0
                _ = read(timer, &expirations, 8)
                let now = Self.now()
                while due(sent) < end && due(sent) <= now {
                    try dispatch(due: due(sent))
                    sent += 1
                }
                if due(sent) < end { try arm(timer, at: due(sent)) }
            }
        }
        for connection in pool { close(connection.fd) }
        return result
    }

    /// Registers `fd` for reading, tagged with `tag` (see `run`).
    private func watch(_ fd: Int32, as tag: UInt64) throws {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = tag
        guard epoll_ctl(poller, EPOLL_CTL_ADD, fd, &event) == 0 else { throw BenchError("epoll_ctl: errno \(errno)") }
    }

    /// A new connection in place of `index`'s (closed by the server, or failed).
    private mutating func reconnect(_ index: Int) throws {
        close(pool[index].fd)  // closing also takes it out of the epoll set
        pool[index] = Connection(fd: try Self.connect(port))
        try watch(pool[index].fd, as: UInt64(index + 1))
    }

    private func arm(_ timer: Int32, at instant: UInt64) throws {
        var spec = itimerspec()
        spec.it_value.tv_sec = Int(instant / 1_000_000_000)
        spec.it_value.tv_nsec = Int(instant % 1_000_000_000)
        guard timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &spec, nil) == 0 else { throw BenchError("timerfd_settime: errno \(errno)") }
    }

    private mutating func dispatch(due: UInt64) throws {
        guard let index = free.popLast() else {
            backlog.append(due)
            if due >= measureFrom { result.waited += 1 }
            return
        }
        try send(on: index, due: due)
    }

    private mutating func send(on index: Int, due: UInt64) throws {
        pool[index].due = due
        inFlight += 1
        let written = request.withUnsafeBytes { Glibc.send(pool[index].fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // A free connection's send buffer is empty: a request head fits whole.
        if written != request.count { try fail(on: index) }
    }

    /// Reads what the connection has; completes every whole answer in it.
    private mutating func receive(on index: Int) throws {
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(pool[index].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                pool[index].buffer += chunk[..<count]
                if count < chunk.count { break }
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            return try fail(on: index)  // closed by the server, or an error
        }
        while let answer = try Self.answer(in: pool[index].buffer) {
            pool[index].buffer.removeFirst(answer.length)
            guard let due = pool[index].due else { throw BenchError("an answer came for no request") }
            if due >= measureFrom {
                result.latencies.append(Self.now() - due)
                if !(200..<300).contains(answer.status) { result.non2xx += 1 }
            }
            pool[index].due = nil
            inFlight -= 1
            if answer.closes { try reconnect(index) }
            try release(index)
        }
    }

    /// A connection that failed: its request counts as failed, a new connection takes its place.
    private mutating func fail(on index: Int) throws {
        if let due = pool[index].due {
            inFlight -= 1
            if due >= measureFrom { result.failures += 1 }
        }
        try reconnect(index)
        try release(index)
    }

    private mutating func release(_ index: Int) throws {
        if backlogHead < backlog.count {
            let due = backlog[backlogHead]
            backlogHead += 1
            return try send(on: index, due: due)
        }
        free.append(index)
    }

    /// Whether `bytes` spell `lowercase` in any case (a header name, or a token of a value). Only
    /// A–Z take the case bit: OR-ing it into any byte would read a CR (0x0D) as `-` (0x2D).
    static func spell(_ bytes: some Collection<UInt8>, _ lowercase: String) -> Bool {
        bytes.count == lowercase.utf8.count && zip(bytes, lowercase.utf8).allSatisfy { ($0 &- 65 < 26 ? $0 | 0x20 : $0) == $1 }
    }

    /// The first whole answer in `bytes`: its length, status and whether the server closes the
    /// connection after it; nil while incomplete. Only `Content-Length` framing is taken.
    static func answer(in bytes: [UInt8]) throws -> (length: Int, status: Int, closes: Bool)? {
        try bytes.withUnsafeBufferPointer { bytes throws -> (length: Int, status: Int, closes: Bool)? in
            var headEnd = 0
            var index = 3
            while index < bytes.count {
                if bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
                    headEnd = index + 1
                    break
                }
                index += 1
            }
            guard headEnd > 0 else {
                if bytes.count > 65_536 { throw BenchError("an answer's head is over 64 KiB") }
                return nil
            }
            // "HTTP/1.1 200 …", read as bytes: the loop parses 12,000 heads a second on the cores
            // it measures.
            let version = Array("HTTP/1.1 ".utf8)
            guard headEnd > 12, (0..<9).allSatisfy({ bytes[$0] == version[$0] }), (9..<12).allSatisfy({ (48...57).contains(bytes[$0]) }) else {
                throw BenchError("not an HTTP/1.1 answer")
            }
            let status = (9..<12).reduce(0) { $0 * 10 + Int(bytes[$1] - 48) }
            var length = 0
            var closes = false
            var lineStart = 0
            for position in 0..<headEnd where bytes[position] == 10 {
                let line = lineStart..<position
                lineStart = position + 1
                guard let colon = line.first(where: { bytes[$0] == UInt8(ascii: ":") }) else { continue }
                let name = bytes[line.lowerBound..<colon]
                if Self.spell(name, "transfer-encoding") { throw BenchError("chunked answers are not supported") }
                guard Self.spell(name, "connection") || Self.spell(name, "content-length") else { continue }
                // The value without blanks or the line's CR.
                let value = bytes[(colon + 1)..<line.upperBound].filter { ![32, 9, 13].contains($0) }
                if Self.spell(name, "connection") {
                    closes = Self.spell(value, "close")
                    continue
                }
                guard !value.isEmpty, value.count < 10, value.allSatisfy({ (48...57).contains($0) }) else {
                    throw BenchError("bad Content-Length \(String(decoding: value, as: UTF8.self))")
                }
                length = value.reduce(0) { $0 * 10 + Int($1 - 48) }
            }
            guard bytes.count >= headEnd + length else { return nil }
            return (headEnd + length, status, closes)
        }
    }
}
