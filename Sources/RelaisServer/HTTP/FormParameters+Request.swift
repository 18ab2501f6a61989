public import Hummingbird
public import RelaisHTTPClient
import NIOCore

extension FormParameters {
    /// The query string of a request (empty when it has none).
    public static func query(of request: Request) -> FormParameters? {
        FormParameters(encoded: request.uri.query ?? "")
    }

    /// The request's form body; nil when the content type is not a form or the body is malformed.
    public static func body(of request: Request, limit: Int) async throws -> FormParameters? {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else { return nil }
        var request = request
        let buffer = try await request.collectBody(upTo: limit)
        return FormParameters(encoded: String(buffer: buffer))
    }
}
