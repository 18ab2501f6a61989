import HTTPTypes
import Hummingbird
import Logging
import RelaisCrypto

/// Gives each request an id: the caller's `X-Request-Id` when it is short and plain (so a load
/// balancer's id follows the request through), a fresh random one otherwise. The id is echoed in the
/// response and attached to the request's logger.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    static let header = HTTPField.Name("X-Request-Id")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let id = request.headers[Self.header].flatMap(Self.acceptable) ?? SecureRandom.token(bits: 96)
        context.requestID = id
        context.logger[metadataKey: "request_id"] = .string(id)
        context.logger[metadataKey: "hb.request.id"] = nil  // Hummingbird's own counter: one id per line is enough
        var response = try await next(request, context)
        response.headers[Self.header] = id
        return response
    }

    /// Accepts ids of 1–64 characters from `[A-Za-z0-9._-]`: anything else could forge log lines.
    static func acceptable(_ candidate: String) -> String? {
        guard (1...64).contains(candidate.utf8.count) else { return nil }
        let allowed = candidate.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                true
            default:
                false
            }
        }
        return allowed ? candidate : nil
    }
}
