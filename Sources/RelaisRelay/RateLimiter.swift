import FoundationEssentials
import Hummingbird
import Logging
import RelaisConfig
import RelaisServer
import RelaisStore

/// Fixed-window request limits per client IP and per app, counted in the store so every instance
/// shares them. When the store fails, requests pass: the endpoints need the store anyway and will
/// answer `temporarily_unavailable` themselves.
struct RateLimiter: Sendable {
    let store: any KeyValueStore
    let settings: RateLimitSettings
    let trustedProxies: [IPNetwork]

    /// Seconds until the window resets when over the limit; nil when allowed.
    func exceeded(ip: String? = nil, clientID: String? = nil, logger: Logger) async -> Int? {
        guard settings.enabled else { return nil }
        let window = max(1, Int(settings.window.components.seconds))
        let now = Int(Date().timeIntervalSince1970)
        let index = now / window
        let retryAfter = (index + 1) * window - now
        do {
            if let ip, try await store.increment("rl:ip:\(ip):\(index)", window: .seconds(window)) > settings.perIP { return retryAfter }
            if let clientID, try await store.increment("rl:client:\(clientID):\(index)", window: .seconds(window)) > settings.perClient {
                logger.warning("rate limit reached for an app", metadata: ["client_id": "\(clientID)"])
                return retryAfter
            }
        } catch {
            logger.warning("rate limiting skipped: store unavailable", metadata: ["error": "\(error)"])
        }
        return nil
    }

    func clientIP(_ request: Request, _ context: RelaisRequestContext) -> String {
        ClientAddress.resolve(request, context: context, trustedProxies: trustedProxies)
    }

    static func page(retryAfter: Int) -> Response {
        var response = Relay.page(.tooManyRequests, code: "too_many_requests", message: "Too many attempts from this device. Wait \(retryAfter) seconds, then try again.")
        response.headers[.retryAfter] = String(retryAfter)
        return response
    }

    static func json(retryAfter: Int, requestID: String) -> Response {
        Relay.oauthError(.tooManyRequests, "too_many_requests", "rate limit reached; retry after \(retryAfter) s", requestID: requestID, headers: [.retryAfter: String(retryAfter)])
    }
}
