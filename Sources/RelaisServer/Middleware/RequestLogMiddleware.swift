import Hummingbird
import Logging

/// One access-log line per request: method, route, status, duration, request id. The query string
/// and bodies are never logged: they carry codes, tokens and identity claims. Nor is the path of a
/// route: its template names it, and the path itself may carry what is not Relais' to log (under
/// `/auth/**`, the guarded request's path, which a gateway appends: `/auth/people/<email>`). An
/// unmatched request's path, the requester's own text, is logged as such (`unmatched_path`).
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        // An autoclosure: nothing is built when the access log is off.
        context.logger.info("request", metadata: Self.metadata(request, route: context.endpointPath, status: response.status.code, milliseconds: milliseconds))
        return response
    }

    private static func metadata(_ request: Request, route: String?, status: Int, milliseconds: Double) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "method": .string(request.method.rawValue),
            "route": .string(route ?? "unmatched"),
            "status": .stringConvertible(status),
            "duration_ms": .string(String(Int(milliseconds.rounded()))),
        ]
        if route == nil { metadata["unmatched_path"] = .string(request.uri.path) }
        return metadata
    }
}
