import HTTPTypes
public import Hummingbird
public import RelaisConfig
public import Tracing

/// One server span per request, the parent of its store and provider spans: `GET /callback`, with
/// the method, the route template, the status and the request id. The query, headers and body are
/// never recorded: they carry codes, states, hints and tokens (Hummingbird's own middleware records
/// every query parameter it was not told to redact; this one fails closed).
///
/// Trace context (`traceparent`, `tracestate`) is taken only from a trusted proxy
/// (`server.trusted_proxies`): any other client could otherwise pick the trace a sign-in joins and
/// force sampling on.
public struct TraceMiddleware: RouterMiddleware {
    public typealias Context = RelaisRequestContext
    let tracer: any Tracer
    let trustedProxies: [IPNetwork]

    public init(tracer: any Tracer, trustedProxies: [IPNetwork]) {
        self.tracer = tracer
        self.trustedProxies = trustedProxies
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var parent = ServiceContext.topLevel
        if let peer = context.peerAddress, trustedProxies.contains(where: { $0.contains(peer) }) {
            tracer.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        }
        let method = request.method.rawValue
        let span = tracer.startSpan(method, context: parent, ofKind: .server)
        span.attributes["http.request.method"] = method
        span.attributes["relais.request_id"] = context.requestID
        do {
            let response = try await ServiceContext.$current.withValue(span.context) { try await next(request, context) }
            // Ends when the response is ready; writing the body (a few hundred bytes) is not counted.
            finish(span, method: method, route: context.endpointPath, status: Int(response.status.code))
            span.end()
            return response
        } catch {
            finish(span, method: method, route: context.endpointPath, status: (error as? any HTTPResponseError)?.status.code ?? 500)
            span.end()
            throw error
        }
    }

    private func finish(_ span: any Span, method: String, route: String?, status: Int) {
        // The route template (`/sessions/{id}`), not the path: a path may hold an identifier.
        if let route {
            span.operationName = "\(method) \(route)"
            span.attributes["http.route"] = route
        }
        span.attributes["http.response.status_code"] = status
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from headers: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { headers[$0] }
    }
}
