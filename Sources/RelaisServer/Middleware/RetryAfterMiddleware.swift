public import Hummingbird

/// Every 503 says when to try again (RFC 9110 §10.2.3, §15.6.4): `Retry-After: 1` unless the
/// answer already names a delay. Relais answers 503 while its store is unreachable (a Redis
/// failover: a second or two until a replica takes over, see docs/operations.md) and while
/// draining; an app or gateway that honours the header retries after the failover instead of
/// showing an error. Outside ``ErrorMiddleware``, so it sees errors already rendered.
public struct RetryAfterMiddleware: RouterMiddleware {
    public typealias Context = RelaisRequestContext
    /// Seconds: about what a Redis Sentinel or Cluster failover takes with a 1 s node timeout.
    public static let seconds = 1

    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        if response.status == .serviceUnavailable, response.headers[.retryAfter] == nil {
            response.headers[.retryAfter] = String(Self.seconds)
        }
        return response
    }
}
