import CCurl
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// The names of the local connections and the provider addresses libcurl asks for.
extension CurlBridges {
    /// Where the listening sockets are named, for the microseconds before libcurl connects:
    /// a memory file system (`/dev/shm`, which containers have too) or the temporary directory;
    /// nil when neither can be written, and libcurl's own sockets are used. A file-system name
    /// rather than an abstract one, because libcurl reuses only connections whose peer address
    /// has a printable name, which an abstract one (a leading zero byte) does not.
    static let directory: String? = {
        let temporary = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        // A socket's name holds 107 bytes: the directory, "/relais-http-" and 16 random characters.
        return ["/dev/shm", temporary].first { $0.utf8.count < 70 && access($0, W_OK | X_OK) == 0 }
    }()

    static func socketAddress(_ address: UnsafeMutablePointer<curl_sockaddr>) -> SocketAddress? {
        let raw = UnsafeRawPointer(address) + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        switch address.pointee.family {
        case AF_INET where address.pointee.addrlen >= MemoryLayout<sockaddr_in>.size:
            return SocketAddress(raw.loadUnaligned(as: sockaddr_in.self))
        case AF_INET6 where address.pointee.addrlen >= MemoryLayout<sockaddr_in6>.size:
            return SocketAddress(raw.loadUnaligned(as: sockaddr_in6.self))
        default:
            return nil
        }
    }
}
