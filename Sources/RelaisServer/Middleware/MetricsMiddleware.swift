import Hummingbird
import Metrics

/// Counts requests and records their latency by route template (never the raw path: ids in paths
/// would explode the label set), method and status.
struct MetricsMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        // The router fills endpointPath (a shared box) while resolving; unmatched requests have none.
        let route = context.endpointPath ?? "unmatched"
        let dimensions = [("route", route), ("method", request.method.rawValue), ("status", String(response.status.code))]
        Counter(label: "relais_http_requests_total", dimensions: dimensions).increment()
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        Metrics.Timer(label: "relais_http_request_duration_seconds", dimensions: dimensions, preferredDisplayUnit: .seconds)
            .recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        return response
    }
}
