import HTTPTypes
public import Hummingbird
public import RelaisConfig

/// The client's address as rate limits and logs need it: the TCP peer, unless the peer is a
/// trusted proxy, in which case the rightmost `X-Forwarded-For` entry that is not a trusted proxy.
/// Entries further left were written by the client itself and cannot be believed.
public enum ClientAddress {
    public static func resolve(peer: String?, forwardedFor: String?, trustedProxies: [IPNetwork]) -> String {
        guard let peer else { return "unknown" }
        guard trustedProxies.contains(where: { $0.contains(peer) }), let forwardedFor else { return peer }
        let hops = forwardedFor.split(separator: ",").map { String($0.trimmingCharacters(in: " ")) }
        for hop in hops.reversed() where !trustedProxies.contains(where: { $0.contains(hop) }) {
            return IPNetwork.withAddress(hop, { _ in true }) != nil ? hop : peer
        }
        return hops.first ?? peer
    }

    public static func resolve(_ request: Request, context: RelaisRequestContext, trustedProxies: [IPNetwork]) -> String {
        resolve(peer: context.peerAddress, forwardedFor: request.headers[.xForwardedFor], trustedProxies: trustedProxies)
    }
}

extension HTTPField.Name {
    public static let xForwardedFor = Self("X-Forwarded-For")!
}

extension Substring {
    /// Drops `character` from both ends. Only the ends are visited: a header value can be long.
    public func trimmingCharacters(in character: Character) -> Substring {
        var start = startIndex, end = endIndex
        while start < end, self[start] == character { start = index(after: start) }
        while end > start, self[index(before: end)] == character { end = index(before: end) }
        return self[start..<end]
    }
}
