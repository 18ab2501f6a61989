import Hummingbird
import Metrics
import Synchronization

/// Counts requests and records their latency by route template (never the raw path: ids in paths
/// would explode the label set), method and status.
struct MetricsMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext

    let series = RequestSeries()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        // The router fills endpointPath (a shared box) while resolving; unmatched requests have none.
        let handles = series.handles(route: context.endpointPath ?? "unmatched", method: request.method, status: response.status.code)
        handles.requests.increment()
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        handles.duration.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        return response
    }
}

/// The counter and timer of each route, method and status, made once. swift-metrics asks its
/// factory at every `Counter(label:dimensions:)`, and Prometheus checks the name and labels and
/// looks the series up under its lock each time: 17,000 instructions a request (callgrind), 7% of
/// a bare route. Bounded: the routes are the router's templates, the statuses three digits, and a
/// method outside HTTP's registered ones counts as `other`, so that a client cannot add series.
final class RequestSeries: Sendable {
    struct Handles: Sendable {
        let requests: Counter
        let duration: Metrics.Timer
    }

    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]
    private let made = Mutex<[Key: Handles]>([:])

    func handles(route: String, method: HTTPRequest.Method, status: Int) -> Handles {
        let key = Key(route: route, method: Self.methods.contains(method.rawValue) ? method.rawValue : "other", status: status)
        if let handles = made.withLock({ $0[key] }) { return handles }
        let dimensions = [("route", key.route), ("method", key.method), ("status", String(status))]
        let handles = Handles(
            requests: Counter(label: "relais_http_requests_total", dimensions: dimensions),
            duration: Metrics.Timer(label: "relais_http_request_duration_seconds", dimensions: dimensions, preferredDisplayUnit: .seconds)
        )
        return made.withLock { made in
            if let first = made[key] { return first }
            made[key] = handles
            return handles
        }
    }
}
