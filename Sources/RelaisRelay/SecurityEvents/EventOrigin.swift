import Hummingbird
import RelaisServer

/// Who made the request being served, for the security events it causes: set once per request by
/// ``EventOriginMiddleware`` and read wherever an event is recorded, so the grants and guards deep
/// in a flow need no request parameter just to say who asked.
struct EventOrigin: Sendable {
    /// The client's address, through trusted proxies only (``ClientAddress``).
    var ip: String
    /// At most 256 bytes of it: the header is the client's to fill.
    var userAgent: String?
    var requestID: String

    @TaskLocal static var current: EventOrigin?
}

struct EventOriginMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let trustedProxies: [IPNetwork]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let userAgent = request.headers[.userAgent].map { String(decoding: $0.utf8.prefix(256), as: UTF8.self) }
        let origin = EventOrigin(
            ip: ClientAddress.resolve(request, context: context, trustedProxies: trustedProxies), userAgent: userAgent, requestID: context.requestID
        )
        return try await EventOrigin.$current.withValue(origin) { try await next(request, context) }
    }
}
