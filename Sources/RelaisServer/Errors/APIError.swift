public import Hummingbird
import NIOCore
import RelaisJOSE

/// The one error shape every Relais endpoint answers with:
/// `{"error": "<stable code>", "error_description": "<for humans>", "request_id": "<id>"}`.
///
/// The field names are OAuth 2.0's (RFC 6749 §5.2), so OAuth clients read Relais' own errors with the
/// code they already have. Codes are stable and listed in docs/errors.md.
public struct APIError: Error, Sendable, Equatable {
    public var status: HTTPResponse.Status
    public var code: String
    public var description: String
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, code: String, description: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.description = description
        self.headers = headers
    }

    public static func notFound() -> APIError {
        APIError(.notFound, code: "not_found", description: "No such endpoint.")
    }

    public static func requestTooLarge(limit: Int) -> APIError {
        APIError(.contentTooLarge, code: "request_too_large", description: "The request body exceeds \(limit) bytes.")
    }

    public static func serverError() -> APIError {
        APIError(.internalServerError, code: "server_error", description: "An unexpected error occurred; it has been logged.")
    }

    /// Renders the error; the request id lets an operator find the matching log line.
    func response(requestID: String?) -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        let body = JSONErrorBody.serialized(code: code, description: description, requestID: requestID)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// The one writer of Relais' JSON error bodies, for ``APIError`` and the relay's refusals alike:
/// `error`, `error_description`, then `error_reason` and `request_id` when there are, keys sorted.
public enum JSONErrorBody {
    public static func serialized(code: String, description: String, reason: String? = nil, requestID: String?) -> [UInt8] {
        var body: [String: JSONValue] = ["error": .string(code), "error_description": .string(description)]
        if let reason { body["error_reason"] = .string(reason) }
        if let requestID { body["request_id"] = .string(requestID) }
        return JSONValue.object(body).serialized()
    }
}
