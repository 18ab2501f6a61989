import Hummingbird
import RelaisServer

/// Renders the refusals a route throws on its surface (``RelayError/rendered(_:_:_:)``): a
/// ``RelayError`` as itself, a store failure as `temporarily_unavailable` (the details go to the
/// log); anything else goes on to the server's error middleware (413 for a body over the limit,
/// 500 otherwise).
struct RelayErrorMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let surface: RelayError.Surface

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return try RelayError.rendered(error, surface, context)
        }
    }
}

/// Refuses a request whose client address is over its limit before the route does any work; the
/// refusal (`too_many_requests`, with `Retry-After`) is thrown, for ``RelayErrorMiddleware`` to
/// render on the route's surface.
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let limiter: RateLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let limited = await limiter.check(request, context) { throw limited }
        return try await next(request, context)
    }
}

extension RouterMethods where Context == RelaisRequestContext {
    /// A group of routes whose refusals render on `surface`, each request counted against its
    /// address's limit first when `limiter` is given.
    func surface(_ surface: RelayError.Surface, limitedBy limiter: RateLimiter? = nil) -> RouterGroup<RelaisRequestContext> {
        let group = self.group().add(middleware: RelayErrorMiddleware(surface: surface))
        if let limiter { group.add(middleware: RateLimitMiddleware(limiter: limiter)) }
        return group
    }
}
