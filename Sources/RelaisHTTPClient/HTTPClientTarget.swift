import Tracing

/// What metrics and spans say of a request's URL: the server and the path, never the userinfo,
/// query or fragment (they carry credentials, codes and tokens).
struct HTTPClientTarget {
    /// `host[:port]` as written, or `invalid` for a URL without one.
    let authority: String
    let host: String
    let port: Int
    let path: String

    /// Read byte by byte: every outbound call asks (a split on "://" went through
    /// _StringProcessing's generic searcher, 1% of a sign-in's CPU).
    init(_ url: String) {
        var url = url
        (authority, host, port, path) = url.withUTF8 { Self.parse($0) }
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> (String, String, Int, String) {
        func text(_ range: Range<Int>) -> String { String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) }
        let n = bytes.count
        guard let separator = (0..<max(0, n - 2)).first(where: { bytes[$0] == 0x3A && bytes[$0 + 1] == 0x2F && bytes[$0 + 2] == 0x2F }) else {
            return ("invalid", "", 443, "/")
        }
        let isHTTP = separator == 4 && zip(bytes[0..<4], "http".utf8).allSatisfy { $0 | 0x20 == $1 }
        let start = separator + 3
        // The authority ends at the path, the query or the fragment; userinfo ends at its last "@".
        let end = (start..<n).first { bytes[$0] == 0x2F || bytes[$0] == 0x3F || bytes[$0] == 0x23 } ?? n
        let hostStart = (start..<end).last { bytes[$0] == 0x40 }.map { $0 + 1 } ?? start
        let pathEnd = (end..<n).first { bytes[$0] == 0x3F || bytes[$0] == 0x23 } ?? n
        let path = end < pathEnd ? text(end..<pathEnd) : "/"
        guard hostStart < end else { return ("invalid", "", isHTTP ? 80 : 443, path) }
        // "[::1]:8080", "[::1]", "example.org:8443", "example.org"
        var hostRange = hostStart..<end
        var portRange: Range<Int>?
        if bytes[hostStart] == 0x5B, let close = (hostStart..<end).first(where: { bytes[$0] == 0x5D }) {
            hostRange = hostStart + 1..<close
            if close + 1 < end, bytes[close + 1] == 0x3A { portRange = close + 2..<end }
        } else if let colon = (hostStart..<end).last(where: { bytes[$0] == 0x3A }) {
            hostRange = hostStart..<colon
            portRange = colon + 1..<end
        }
        let port = portRange.flatMap { Int(text($0)) } ?? (isHTTP ? 80 : 443)
        return (text(hostStart..<end), text(hostRange), port, path)
    }
}

/// Writes trace context (`traceparent`, `tracestate`) into an outbound header list.
struct HeaderListInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout [(name: String, value: String)]) {
        headers.removeAll { $0.name.lowercased() == key.lowercased() }
        headers.append((name: key, value: value))
    }
}
