import NIOCore
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A listener that could not open its address, in plain words: "cannot listen on 127.0.0.1:8080.
/// Address already in use: another process …" rather than NIO's
/// `bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`. The system's own words
/// start the reason (tests and scripts may look for them).
public struct ListenError: Error, CustomStringConvertible, Sendable {
    /// `host:port` as configured.
    public let address: String
    /// What went wrong, for a person.
    public let reason: String
    /// What to do about it.
    public let advice: String

    public var description: String { "cannot listen on \(address). \(reason). \(advice)." }

    /// `error` explained when it is a bind failure; nil otherwise.
    static func explaining(_ error: any Error, address: String, advice: String) -> ListenError? {
        guard let io = error as? IOError, io.description.hasPrefix("bind") else { return nil }
        let reason: String
        switch io.errnoCode {
        case EADDRINUSE: reason = "Address already in use: another process (another relais, perhaps) listens on this port"
        case EACCES: reason = "Permission denied: ports below 1024 need privileges"
        case EADDRNOTAVAIL: reason = "Cannot assign requested address: this machine has no such address"
        default: reason = io.description
        }
        return ListenError(address: address, reason: reason, advice: advice)
    }
}

/// Runs a listening service, turning its bind failure into a ``ListenError``.
struct ListeningService: Service {
    let base: any Service
    let address: String
    let advice: String

    func run() async throws {
        do {
            try await base.run()
        } catch {
            throw ListenError.explaining(error, address: address, advice: advice) ?? error
        }
    }
}
