/// Which redirect URIs an app may register (RFC 8252 §7 and §8).
public enum RedirectURIRules {
    /// Nil when acceptable; otherwise why not.
    public static func problem(_ uri: String) -> String? {
        guard let colon = uri.firstIndex(of: ":"), colon != uri.startIndex else { return "not an absolute URI" }
        if uri.contains("#") { return "must not contain a fragment" }
        let scheme = uri[..<colon].lowercased()
        switch scheme {
        case "https":
            return uri.count > "https://".count ? nil : "has no host"
        case "http":
            if let host = loopbackHost(uri) {
                return host == "localhost" ? "use 127.0.0.1 or [::1], not localhost (RFC 8252 §8.3)" : nil
            }
            return "plain http is only for loopback redirects (http://127.0.0.1:{port}/...)"
        default:
            // Private-use schemes must be reverse domain names (RFC 8252 §7.1): com.example.app:/callback
            guard scheme.contains("."), scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "+" }) else {
                return "a private-use scheme must be a reverse domain name such as com.example.app (RFC 8252 §7.1)"
            }
            return nil
        }
    }

    /// Whether `uri` is an `http://` URL on a loopback host: 127.0.0.1, [::1] or localhost.
    public static func isLoopback(_ uri: String) -> Bool { loopbackHost(uri) != nil }

    /// The host of an `http://` URL whose authority is exactly a loopback host (`127.0.0.1`,
    /// `[::1]` or `localhost`, in lower case) with an optional port; nil otherwise. The authority
    /// is parsed, never matched as a prefix: `http://127.0.0.1.evil.example` and
    /// `http://127.0.0.1:80@evil.example` (userinfo) are not loopback.
    public static func loopbackHost(_ uri: String) -> String? {
        let lowered = uri.lowercased()
        guard lowered.hasPrefix("http://") else { return nil }
        let authority = lowered.dropFirst("http://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.contains("@") else { return nil }
        let host: Substring
        let rest: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            rest = authority[authority.index(after: close)...]
        } else {
            host = authority.prefix { $0 != ":" }
            rest = authority.dropFirst(host.count)
        }
        guard host == "127.0.0.1" || host == "[::1]" || host == "localhost" else { return nil }
        if !rest.isEmpty {
            let port = rest.dropFirst()
            guard rest.first == ":", (1...5).contains(port.count), port.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(port), (1...65535).contains(number)
            else { return nil }
        }
        return String(host)
    }
}
