import Hummingbird
import Logging

/// Turns every thrown error into the uniform JSON shape, so no endpoint leaks a stack trace, a
/// framework message or an empty body. Unknown errors become a 500 whose details go to the log only.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.response(requestID: context.requestID)
        } catch let error as HTTPError {
            return Self.translate(error).response(requestID: context.requestID)
        } catch {
            context.logger.error("unhandled error", metadata: ["error_type": "\(type(of: error))"])
            return APIError.serverError().response(requestID: context.requestID)
        }
    }

    /// Hummingbird's own errors (no route, body too large, bad request) in Relais' vocabulary.
    static func translate(_ error: HTTPError) -> APIError {
        switch error.status {
        case .notFound: .notFound()
        case .contentTooLarge: APIError(.contentTooLarge, code: "request_too_large", description: "The request body is too large.")
        case .badRequest: APIError(.badRequest, code: "invalid_request", description: error.body ?? "The request is malformed.")
        case let status where status.code >= 500: .serverError()
        case let status: APIError(status, code: "http_\(status.code)", description: error.body ?? status.reasonPhrase)
        }
    }
}
