public import Hummingbird
import NIOCore

/// Per-request state: Hummingbird's core context plus the request id every log line and error carries.
public struct RelaisRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by ``RequestIDMiddleware`` before anything else runs.
    public var requestID: String
    /// The TCP peer's address (a load balancer's, behind one; see ``ClientAddress``). Formatted
    /// when read: most requests (a session check, a health probe) never read it.
    public var peerAddress: String? { peer.ipAddress }
    /// The same, unformatted: to keep for later without paying for the formatting now.
    public let peer: Peer

    /// A TCP peer's address, formatted only when read.
    public struct Peer: Sendable {
        let address: SocketAddress?
        public var ipAddress: String? { address?.ipAddress }
    }

    public init(source: Source) {
        self.coreContext = .init(source: source)
        self.requestID = ""
        self.peer = Peer(address: source.channel.remoteAddress)
    }
}
