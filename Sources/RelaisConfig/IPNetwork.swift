#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `::1/128`, or a bare address): the
/// parser `server.trusted_proxies` is checked with at load and matched with at run time, so a
/// network that loads is one that works.
public struct IPNetwork: Sendable, Equatable {
    let bytes: [UInt8]
    let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let first = parts.first, let address = IPNetwork.parse(first) else { return nil }
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

    package static func parse(_ text: String) -> [UInt8]? { withAddress(text) { Array($0) } }

    /// The address's bytes (4, or 16 for IPv6; an IPv4-mapped IPv6 address is its IPv4 address),
    /// read on the stack: checked on every request, so no array is made for it.
    package static func withAddress<Result>(_ text: String, _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
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
