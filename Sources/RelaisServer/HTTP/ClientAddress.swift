import HTTPTypes
public import Hummingbird

#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `::1/128`, or a bare address).
public struct IPNetwork: Sendable, Equatable {
    let bytes: [UInt8]
    let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let address = IPNetwork.parse(parts[0]) else { return nil }
        let maxLength = address.count * 8
        if parts.count == 2 {
            guard let length = Int(parts[1]), (0...maxLength).contains(length) else { return nil }
            prefixLength = length
        } else {
            prefixLength = maxLength
        }
        bytes = address
    }

    public func contains(_ address: String) -> Bool {
        IPNetwork.withAddress(address) { candidate in
            guard candidate.count == bytes.count else { return false }
            var remaining = prefixLength
            for index in 0..<bytes.count where remaining > 0 {
                let bits = min(8, remaining)
                let mask: UInt8 = bits == 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                if bytes[index] & mask != candidate[index] & mask { return false }
                remaining -= bits
            }
            return true
        } ?? false
    }

    static func parse(_ text: String) -> [UInt8]? { withAddress(text) { Array($0) } }

    /// The address's bytes (4, or 16 for IPv6; an IPv4-mapped IPv6 address is its IPv4 address),
    /// read on the stack: checked on every request, so no array is made for it.
    static func withAddress<Result>(_ text: String, _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4, body) }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        return withUnsafeBytes(of: &v6) { raw in
            if raw[0..<10].allSatisfy({ $0 == 0 }) && raw[10] == 0xFF && raw[11] == 0xFF { return body(UnsafeRawBufferPointer(rebasing: raw[12...])) }
            return body(raw)
        }
    }

    /// Who an address stands for when counting attempts: an IPv4 address is one client, but an
    /// IPv6 /64 is one subscriber (a host picks any address in it at will, RFC 8981), so it counts
    /// as one. Text that is not an address counts as itself.
    public static func limitKey(_ address: String) -> String {
        withAddress(address) { bytes in
            guard bytes.count == 16 else { return "\(bytes[0]).\(bytes[1]).\(bytes[2]).\(bytes[3])" }
            let hex = Array("0123456789abcdef")
            var key = ""
            for (index, byte) in bytes.prefix(8).enumerated() {
                if index > 0 && index % 2 == 0 { key.append(":") }
                key.append(hex[Int(byte >> 4)])
                key.append(hex[Int(byte & 0xF)])
            }
            return key + "::/64"
        } ?? address
    }
}

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
