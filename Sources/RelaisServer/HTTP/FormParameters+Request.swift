public import Hummingbird
public import RelaisHTTPClient
import NIOCore

extension FormParameters {
    /// The query string of a request (empty when it has none).
    public static func query(of request: Request) -> FormParameters? {
        FormParameters(encoded: request.uri.query ?? "")
    }

    /// The request's form body; nil when the content type is not a form or the body is malformed.
    /// - Throws: ``APIError/requestTooLarge(limit:)`` (413) when the body is over `limit`, declared
    ///   or not (a chunked body is counted as it arrives).
    public static func body(of request: Request, limit: Int) async throws -> FormParameters? {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else { return nil }
        var request = request
        let buffer = try await BodyLimit.collect(&request, upTo: limit)
        return FormParameters(encoded: String(buffer: buffer))
    }
}
