import Hummingbird
import Logging

/// One access-log line per request: method, route, status, duration, request id. The query string
/// and bodies are never logged: they carry codes, tokens and identity claims.
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        context.logger.info(
            "request",
            metadata: [
                "method": .string(request.method.rawValue),
                "path": .string(request.uri.path),
                "route": .string(context.endpointPath ?? "unmatched"),
                "status": .stringConvertible(response.status.code),
                "duration_ms": .string(String(Int(milliseconds.rounded()))),
            ]
        )
        return response
    }
}
