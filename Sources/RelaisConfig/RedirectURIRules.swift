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
            if isLoopback(uri) {
                return uri.lowercased().hasPrefix("http://localhost") ? "use 127.0.0.1 or [::1], not localhost (RFC 8252 §8.3)" : nil
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

    public static func isLoopback(_ uri: String) -> Bool {
        let lowered = uri.lowercased()
        return lowered.hasPrefix("http://127.0.0.1") || lowered.hasPrefix("http://[::1]") || lowered.hasPrefix("http://localhost")
    }
}
