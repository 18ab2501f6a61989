import Hummingbird

/// Refuses request bodies over the configured size with 413, whether the size is declared
/// (Content-Length, refused before reading) or discovered while streaming (chunked uploads).
/// Relais' endpoints take small forms, so the body is collected here once for the handlers.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let maxBytes: Int

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > maxBytes {
            throw APIError.requestTooLarge(limit: maxBytes)
        }
        var request = request
        do {
            _ = try await request.collectBody(upTo: maxBytes)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError.requestTooLarge(limit: maxBytes)
        }
        return try await next(request, context)
    }
}
