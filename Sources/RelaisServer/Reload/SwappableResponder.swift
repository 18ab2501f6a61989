public import Hummingbird
import Synchronization

/// The application's responder, replaceable while the server runs: a configuration reload builds
/// a whole new router (middleware, limits, routes) and swaps it in. A request keeps the responder
/// it started with until it ends, so sign-ins in flight finish on the configuration they began on
/// for that request, and their next request meets the new one.
public final class SwappableResponder: HTTPResponder, Sendable {
    public typealias Context = RelaisRequestContext
    private let current: Mutex<RouterResponder<RelaisRequestContext>>

    public init(_ responder: RouterResponder<RelaisRequestContext>) {
        current = Mutex(responder)
    }

    public func respond(to request: Request, context: Context) async throws -> Response {
        let responder = current.withLock { $0 }
        return try await responder.respond(to: request, context: context)
    }

    public func replace(with responder: RouterResponder<RelaisRequestContext>) {
        current.withLock { $0 = responder }
    }
}
