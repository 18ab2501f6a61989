import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback port that accepts TCP connections and never answers: the kernel completes the
/// handshake into the listen backlog, and nothing ever reads or writes. What a hung server looks
/// like to a client, with no handler to hold and nothing to wait for.
public final class SilentListener: @unchecked Sendable {
    public let port: Int
    private let socketDescriptor: Int32

    public init() throws {
        socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        port = try FreePort.find()
        let descriptor = socketDescriptor
        // No close here: every property is set, so a throw runs deinit, which closes it (a second
        // close could shut a descriptor another test has opened meanwhile).
        guard RawConnection.withLoopback(port: port, { bind(descriptor, $0, $1) }) == 0, listen(socketDescriptor, 8) == 0 else {
            throw POSIXError(.EADDRINUSE)
        }
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    deinit { close(socketDescriptor) }
}
