public import Hummingbird
import NIOCore

/// RFC 9110 §15.5.6: a path the router serves, asked with a method it does not serve there, is
/// `405 Method Not Allowed` with an `Allow` header listing the methods it does serve (a 404 would
/// tell a client the path does not exist). Any other unmatched request stays a 404.
///
/// Added after every route (``RelaisApplication/makeRouter(configuration:dependencies:additionalRoutes:)``):
/// Hummingbird wraps a route in the middleware added before it, so this one runs only around the
/// router's not-found answer. It resolves the request's path in a router of the same path
/// patterns, built once from ``Router/routes``, whose one route per path answers that path's
/// `Allow` list: the same matching (captures, `**`) as the real router, by construction.
public struct MethodNotAllowedMiddleware: RouterMiddleware {
    public typealias Context = RelaisRequestContext
    private let allowLists: RouterResponder<Context>

    /// `routes`: every route of the router this middleware is added to, as ``Router/routes`` lists them.
    public init(routes: [Router<Context>.RouteDescription]) {
        var methods: [String: (path: RouterPath, methods: Set<String>)] = [:]
        for route in routes {
            methods[route.path.description, default: (path: route.path, methods: [])].methods.insert(route.method.rawValue)
        }
        let router = Router(context: Context.self)
        for (path, allowed) in methods.values {
            let allow = allowed.sorted().joined(separator: ", ")
            router.on(path, method: .get) { _, _ in Response(status: .methodNotAllowed, headers: [.allow: allow]) }
        }
        allowLists = router.buildResponder()
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            guard let allow = try await allowed(at: request, context: context) else { throw error }
            throw APIError.methodNotAllowed(allow: allow)
        }
    }

    /// The `Allow` list of the request's path; nil when no route has that path.
    func allowed(at request: Request, context: Context) async throws -> String? {
        let probe = Request(head: HTTPRequest(method: .get, scheme: nil, authority: nil, path: request.uri.path), body: RequestBody(buffer: ByteBuffer()))
        let answer = try await allowLists.respond(to: probe, context: context)
        guard answer.status == .methodNotAllowed else { return nil }
        return answer.headers[.allow]
    }
}

extension APIError {
    /// RFC 9110 §15.5.6; `allow` is the path's methods, comma-separated.
    public static func methodNotAllowed(allow: String) -> APIError {
        APIError(.methodNotAllowed, code: "method_not_allowed", description: "This endpoint does not answer this method; Allow lists those it does.", headers: [.allow: allow])
    }
}
