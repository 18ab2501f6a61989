import Tracing

/// What metrics and spans say of a request's URL: the server and the path, never the userinfo,
/// query or fragment (they carry credentials, codes and tokens).
struct HTTPClientTarget {
    /// `host[:port]` as written, or `invalid` for a URL without one.
    let authority: String
    let host: String
    let port: Int
    let path: String

    init(_ url: String) {
        let parts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        let rest = parts.count == 2 ? parts[1] : ""
        let written = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPort = written.split(separator: "@").last.map(String.init) ?? ""
        authority = hostPort.isEmpty ? "invalid" : hostPort
        let path = rest.dropFirst(written.count).prefix { $0 != "?" && $0 != "#" }
        self.path = path.isEmpty ? "/" : String(path)
        // "[::1]:8080", "[::1]", "example.org:8443", "example.org"
        let hostText: Substring, portText: Substring?
        if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") {
            hostText = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            portText = after.hasPrefix(":") ? after.dropFirst() : nil
        } else if let colon = hostPort.lastIndex(of: ":") {
            hostText = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            hostText = hostPort[...]
            portText = nil
        }
        host = String(hostText)
        port = portText.flatMap { Int($0) } ?? (parts.count == 2 && parts[0].lowercased() == "http" ? 80 : 443)
    }
}

/// Writes trace context (`traceparent`, `tracestate`) into an outbound header list.
struct HeaderListInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout [(name: String, value: String)]) {
        headers.removeAll { $0.name.lowercased() == key.lowercased() }
        headers.append((name: key, value: value))
    }
}
