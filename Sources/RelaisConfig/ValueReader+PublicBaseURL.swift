extension ValueReader {
    /// `server.public_base_url`: an absolute http(s) URL without query or fragment, https in
    /// production except on a loopback host.
    mutating func checkPublicBaseURL(_ url: String, environment: RelaisConfiguration.Environment) {
        let parts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, ["http", "https"].contains(parts[0].lowercased()), !parts[1].isEmpty else {
            problem("server.public_base_url", "expected an absolute http(s) URL, got '\(url)'")
            return
        }
        if parts[1].contains("?") || parts[1].contains("#") {
            problem("server.public_base_url", "must not carry a query or fragment")
        }
        let authority = parts[1].prefix { $0 != "/" }
        let host = authority.hasPrefix("[") ? String(authority.prefix { $0 != "]" }.dropFirst()) : String(authority.prefix { $0 != ":" })
        let afterHost = authority.hasPrefix("[") ? authority.drop { $0 != "]" }.dropFirst() : authority.drop { $0 != ":" }
        if !afterHost.isEmpty {
            let port = afterHost.dropFirst()
            guard afterHost.first == ":", (1...5).contains(port.count), port.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(port),
                (1...65535).contains(number)
            else {
                problem("server.public_base_url", "the port must be 1 to 65535 in ASCII digits, got '\(afterHost)'")
                return
            }
        }
        let isLoopback = host == "127.0.0.1" || host == "localhost" || host == "::1"
        if parts[0].lowercased() == "http" && !isLoopback && environment == .production {
            problem("server.public_base_url", "must use https in production (plain http is allowed for 127.0.0.1, localhost and ::1)")
        }
    }
}
