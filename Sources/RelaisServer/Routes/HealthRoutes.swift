import Hummingbird
import Logging
import NIOCore
import RelaisCrypto
import RelaisStore
import Synchronization

/// Tracks whether the server is draining (SIGTERM received), so /readyz can tell the load
/// balancer to stop routing here while in-flight requests finish.
public final class DrainState: Sendable {
    private let draining = Atomic<Bool>(false)
    public init() {}
    public var isDraining: Bool { draining.load(ordering: .relaxed) }
    public func beginDraining() { draining.store(true, ordering: .relaxed) }
}

/// `/healthz`: the process answers (liveness). `/readyz`: this instance can serve sign-ins, i.e. the
/// store answers and the server is not draining (readiness). Both are cheap enough to poll every second.
struct HealthRoutes {
    let store: any KeyValueStore
    let drainState: DrainState

    func register(on router: Router<RelaisRequestContext>) {
        router.get("/healthz") { _, _ in
            Self.json(.ok, #"{"status":"ok"}"#)
        }
        router.get("/readyz") { _, context in
            if drainState.isDraining {
                return Self.json(.serviceUnavailable, #"{"status":"unavailable","checks":{"server":"draining"}}"#)
            }
            do {
                try await store.ping()
                return Self.json(.ok, #"{"status":"ready","checks":{"store":"ok"}}"#)
            } catch let error as StoreError {
                // The detailed reason (addresses, Redis messages) goes to the log, not to the caller.
                context.logger.warning("readiness check failed", metadata: ["error": "\(error)"])
                return Self.json(.serviceUnavailable, #"{"status":"unavailable","checks":{"store":"\#(error.code)"}}"#)
            }
        }
    }

    static func json(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: body))
        )
    }
}

/// `/metrics` in Prometheus text format.
/// `/metrics` in the Prometheus text format, behind a bearer secret when one is configured (compared
/// in constant time).
struct MetricsRoute {
    let bearerToken: String?

    func register<Context: RequestContext>(on router: Router<Context>) {
        router.get("/metrics") { request, _ in
            if let bearerToken {
                let presented = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil } ?? ""
                guard ConstantTime.equals(presented, bearerToken) else {
                    return Response(
                        status: .unauthorized, headers: [.wwwAuthenticate: #"Bearer realm="metrics""#, .contentType: "text/plain; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(string: "metrics need the bearer token of metrics.bearer_token_file\n")))
                }
            }
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: RelaisMetrics.exposition()))
            )
        }
    }
}
