import HTTPTypes
import Hummingbird
import RelaisConfig
import RelaisServer

/// Who made the request being served, for the security events it causes: set once per request by
/// ``EventOriginMiddleware`` and read wherever an event is recorded, so the grants and guards deep
/// in a flow need no request parameter just to say who asked. It keeps the request's headers (a
/// reference, not a copy) and resolves the address only when an event is written: most requests
/// (session checks at `/auth`) write none and pay nothing for it.
struct EventOrigin: Sendable {
    let headers: HTTPFields
    let peer: RelaisRequestContext.Peer
    let requestID: String
    let trustedProxies: [IPNetwork]

    /// The client's address, through trusted proxies only (``ClientAddress``).
    var ip: String { ClientAddress.resolve(peer: peer.ipAddress, forwardedFor: headers[.xForwardedFor], trustedProxies: trustedProxies) }

    /// At most 256 bytes of it: the header is the client's to fill. Read through `occurrence`:
    /// HTTPFields' subscript joins values with generic code the compiler leaves unspecialised
    /// (about 2,500 instructions even for one value); repeated values are still joined.
    var userAgent: String? {
        let value: String?
        switch headers.occurrence(of: .userAgent) {
        case .absent: value = nil
        case .once(let single): value = single
        case .repeated: value = headers[.userAgent]
        }
        return value.map { String(decoding: $0.utf8.prefix(256), as: UTF8.self) }
    }

    @TaskLocal static var current: EventOrigin?

    /// Runs `work` with this request as the origin of the events it records.
    static func binding<Result>(
        _ request: Request, _ context: RelaisRequestContext, trustedProxies: [IPNetwork], _ work: () async throws -> Result
    ) async throws -> Result {
        let origin = EventOrigin(headers: request.headers, peer: context.peer, requestID: context.requestID, trustedProxies: trustedProxies)
        return try await $current.withValue(origin) { try await work() }
    }
}

struct EventOriginMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let trustedProxies: [IPNetwork]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await EventOrigin.binding(request, context, trustedProxies: trustedProxies) { try await next(request, context) }
    }
}
