/// Kubernetes "service links": for every Service of the namespace, each pod gets
/// `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT[_<PORT NAME>]`, `<NAME>_PORT` and
/// `<NAME>_PORT_<n>_<PROTO>[_PROTO|_PORT|_ADDR]`. A Service named `relais` (or `relais-…`) thus
/// puts `RELAIS_PORT=tcp://10.0.0.11:8080` and friends in Relais' own environment prefix.
///
/// A variable is taken for a service link only when its name and its value both have the shape
/// Kubernetes gives them; anything else still goes through the typo check.
enum ServiceLinks {
    static func isServiceLink(name: String, value: String) -> Bool {
        let parts = name.split(separator: "_", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2 else { return false }
        // <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT, <NAME>_SERVICE_PORT_<PORT NAME>
        if let service = parts.lastIndex(of: "SERVICE"), service > 0, service + 1 < parts.count {
            let rest = parts[(service + 1)...]
            if rest == ["HOST"] { return isAddress(value) }
            if rest.first == "PORT" { return isPort(value) }
        }
        // <NAME>_PORT, <NAME>_PORT_<n>_<PROTO>, then _PROTO, _PORT or _ADDR
        for index in parts.indices.dropFirst() where parts[index] == "PORT" {
            let rest = Array(parts[(index + 1)...])
            if rest.isEmpty { return isURL(value) }
            guard rest.count >= 2, isPort(rest[0]), ["TCP", "UDP", "SCTP"].contains(rest[1]) else { continue }
            switch rest.dropFirst(2).first {
            case nil where rest.count == 2: return isURL(value)
            case "PROTO" where rest.count == 3: return ["tcp", "udp", "sctp"].contains(value)
            case "PORT" where rest.count == 3: return isPort(value)
            case "ADDR" where rest.count == 3: return isAddress(value)
            default: continue
            }
        }
        return false
    }

    private static func isPort(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 5 && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// An IPv4 or IPv6 literal's characters (Kubernetes gives cluster IPs, never names).
    private static func isAddress(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) || $0 == 0x2E || $0 == 0x3A }
    }

    /// `tcp://10.0.0.11:8080` (or udp, sctp; IPv6 in brackets).
    private static func isURL(_ text: String) -> Bool {
        guard let scheme = ["tcp://", "udp://", "sctp://"].first(where: text.hasPrefix) else { return false }
        let authority = text.dropFirst(scheme.count)
        guard let colon = authority.lastIndex(of: ":") else { return false }
        var host = authority[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return isAddress(String(host)) && isPort(String(authority[authority.index(after: colon)...]))
    }
}
