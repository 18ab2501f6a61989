import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import RelaisTestSupport
import Testing

@testable import RelaisServer

/// RFC 9110 §15.5.6 through the application as `serve` assembles it (``RelaisApplication/makeRouter``):
/// a known path with a method it does not serve is 405 with `Allow`; an unknown path stays 404.
@Suite(.tags(.fast)) struct MethodNotAllowedTests {
    /// Routes of the shapes the relay registers: one method, several, a capture, a `**` tail.
    static func routes(_ router: Router<RelaisRequestContext>, _: RelaisDependencies) {
        router.post("/token") { _, _ in "token" }
        router.get("/logout") { _, _ in "page" }
        router.post("/logout") { _, _ in "api" }
        router.delete("/sessions/{id}") { _, context in context.parameters.get("id") ?? "" }
        router.get("/auth/**") { _, _ in "guarded" }
        router.post("/auth/**") { _, _ in "guarded" }
    }

    static func expect405(_ client: some TestClientProtocol, _ uri: String, _ method: HTTPRequest.Method, allow: String) async throws {
        try await client.execute(uri: uri, method: method) { response in
            #expect(response.status == .methodNotAllowed, "\(method) \(uri)")
            #expect(response.headers[.allow] == allow, "\(method) \(uri)")
            let body = try decode(ErrorBody.self, response.body)
            #expect(body.error == "method_not_allowed")
            #expect(body.request_id == response.headers[HTTPField.Name("X-Request-Id")!])
            #expect(response.headers[.contentType] == "application/json")
            #expect(response.headers[.cacheControl] == "no-store")
        }
    }

    @Test func aKnownPathWithAnUndeclaredMethodIs405WithItsMethods() async throws {
        try await withApplication(routes: Self.routes) { client in
            try await Self.expect405(client, "/token", .get, allow: "POST")
            try await Self.expect405(client, "/token?grant_type=x", .put, allow: "POST")
            try await Self.expect405(client, "/logout", .delete, allow: "GET, POST")
            try await Self.expect405(client, "/sessions/abc", .get, allow: "DELETE")
            try await Self.expect405(client, "/auth/orders/42", .patch, allow: "GET, POST")
            // HEAD is not generated from GET here: the path does not serve it, and says what it does.
            try await Self.expect405(client, "/healthz", .head, allow: "GET")
            try await Self.expect405(client, "/healthz", .options, allow: "GET")
            // A method no standard names is still a method this path does not serve.
            try await Self.expect405(client, "/token", HTTPRequest.Method("PURGE")!, allow: "POST")
        }
    }

    @Test func declaredMethodsAndUnknownPathsAnswerAsBefore() async throws {
        try await withApplication(routes: Self.routes) { client in
            try await client.execute(uri: "/token", method: .post) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == "token")
            }
            try await client.execute(uri: "/sessions/abc", method: .delete) { response in
                #expect(String(buffer: response.body) == "abc")
            }
            try await client.execute(uri: "/auth/orders/42", method: .post) { response in
                #expect(response.status == .ok)
            }
            // No route has these paths, with any method: 404, no Allow.
            for (uri, method) in [("/no/such/thing", HTTPRequest.Method.get), ("/tokens", .post), ("/sessions", .delete), ("/sessions/a/b", .delete)] {
                try await client.execute(uri: uri, method: method) { response in
                    #expect(response.status == .notFound, "\(method) \(uri)")
                    #expect(response.headers[.allow] == nil)
                    let body = try decode(ErrorBody.self, response.body)
                    #expect(body.error == "not_found")
                }
            }
        }
    }

    @Test func theAllowListIsBuiltFromTheRoutesGiven() async throws {
        // The middleware alone, on a router whose routes it did not see: it knows only what it was given.
        let router = Router(context: RelaisRequestContext.self)
        router.middlewares.add(ErrorMiddleware())
        router.get("/a") { _, _ in "a" }
        router.put("/b") { _, _ in "b" }
        router.middlewares.add(MethodNotAllowedMiddleware(routes: router.routes.filter { $0.path.description == "/a" }))
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/a", method: .post) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(response.headers[.allow] == "GET")
            }
            try await client.execute(uri: "/b", method: .post) { response in
                #expect(response.status == .notFound)
            }
        }
    }
}
