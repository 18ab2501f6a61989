import Hummingbird
import NIOCore

/// Refuses request bodies over the configured size with 413, whether the size is declared
/// (Content-Length, refused before reading) or discovered while streaming (chunked uploads).
/// Relais' endpoints take small forms, so the body is collected here once for the handlers.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let maxBytes: Int

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        _ = try await BodyLimit.collect(&request, upTo: maxBytes)
        return try await next(request, context)
    }
}

/// Collecting a body with a size limit, whichever way the limit is found out.
enum BodyLimit {
    /// Collects the body; over `limit` (declared by Content-Length, or counted while a chunked
    /// body streams in) it is 413, never a 500.
    static func collect(_ request: inout Request, upTo limit: Int) async throws -> ByteBuffer {
        // One declared length is checked before reading: NIO's parser refuses a repeated or
        // listed one. The subscript would join values with unspecialised generic code.
        if case .once(let value) = request.headers.occurrence(of: .contentLength), let declared = Int(value), declared > limit {
            throw APIError.requestTooLarge(limit: limit)
        }
        do {
            return try await request.collectBody(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError.requestTooLarge(limit: limit)
        } catch is NIOTooManyBytesError {
            throw APIError.requestTooLarge(limit: limit)
        }
    }
}
