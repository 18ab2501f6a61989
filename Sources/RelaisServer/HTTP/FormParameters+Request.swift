public import Hummingbird
import NIOCore
public import RelaisHTTPClient

extension FormParameters {
    /// The query string of a request (empty when it has none).
    public static func query(of request: Request) -> FormParameters? {
        FormParameters(encoded: request.uri.query ?? "")
    }

    /// The request's form body; nil when the content type is not a form or the body is malformed.
    /// - Throws: ``APIError/requestTooLarge(limit:)`` (413) when the body is over `limit`, declared
    ///   or not (a chunked body is counted as it arrives).
    public static func body(of request: Request, limit: Int) async throws -> FormParameters? {
        guard isForm(request.headers) else { return nil }
        var request = request
        let buffer = try await BodyLimit.collect(&request, upTo: limit)
        return FormParameters(encoded: String(buffer: buffer))
    }

    /// True when the (single) Content-Type is a form, its parameters aside; read on the bytes,
    /// case-insensitively (RFC 9110 §8.3.1). Two Content-Type fields are not a form.
    static func isForm(_ headers: HTTPFields) -> Bool {
        guard case .once(let value) = headers.occurrence(of: .contentType) else { return false }
        let utf8 = value.utf8
        let form = "application/x-www-form-urlencoded".utf8
        guard utf8.count >= form.count, zip(utf8, form).allSatisfy({ (0x41...0x5A ~= $0 ? $0 | 0x20 : $0) == $1 }) else { return false }
        // Only parameters may follow: `; charset=UTF-8`, or white space before them.
        let rest = utf8.dropFirst(form.count).drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        return rest.isEmpty || rest.first == UInt8(ascii: ";")
    }
}
