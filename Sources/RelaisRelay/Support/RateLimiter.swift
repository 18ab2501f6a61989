import Hummingbird
import Logging
import RelaisClock
import RelaisConfig
import RelaisServer

/// Fixed-window request limits per client IP and per app, counted in the store so every instance
/// shares them. When the store fails, requests pass: the endpoints need the store anyway and will
/// answer `temporarily_unavailable` themselves.
struct RateLimiter: Sendable {
    let sessions: RelayStore
    let settings: RateLimitSettings
    let trustedProxies: [IPNetwork]
    let events: SecurityEventLog

    /// `too_many_requests` (with `Retry-After`) when over a limit; nil when allowed.
    func check(ip: String? = nil, clientID: String? = nil, logger: Logger) async -> RelayError? {
        guard settings.enabled else { return nil }
        let window = max(1, Int(settings.window.components.seconds))
        let now = sessions.clock.seconds
        let index = now / window
        let retryAfter = (index + 1) * window - now
        do {
            if let ip {
                let count = try await sessions.countRequest(bucket: "ip", id: ip, window: index, length: .seconds(window))
                // One event per address and window, not one per refused request: a flood must not flood the SIEM.
                if count == settings.perIP + 1 { events.record(.rateLimited, reason: RelayError.Code.tooManyRequests.rawValue, [("limit", "ip")]) }
                if count > settings.perIP { return .tooManyRequests(retryAfter: retryAfter) }
            }
            if let clientID {
                let count = try await sessions.countRequest(bucket: "client", id: clientID, window: index, length: .seconds(window))
                if count == settings.perClient + 1 {
                    logger.warning("rate limit reached for an app", metadata: ["client_id": "\(clientID)"])
                    events.record(.rateLimited, reason: RelayError.Code.tooManyRequests.rawValue, client: clientID, [("limit", "client")])
                }
                if count > settings.perClient { return .tooManyRequests(retryAfter: retryAfter) }
            }
        } catch {
            logger.warning("rate limiting skipped: store unavailable", metadata: ["error": "\(error)"])
        }
        return nil
    }

    /// User-code attempts of people at `/device`: per client address (an IPv6 /64 counts as one),
    /// and for everyone together (a user code has 36 bits; these bound how many guesses the whole
    /// service takes). Wrong guesses cost the guesser; the request they aim at lives on.
    func checkUserCode(_ request: Request, _ context: RelaisRequestContext) async -> RelayError? {
        let ip = IPNetwork.limitKey(ClientAddress.resolve(request, context: context, trustedProxies: trustedProxies))
        return await checkUserCode(guesser: ("uc-ip", ip, settings.userCodesPerIP, "user_codes_ip"), everyone: true, logger: context.logger)
    }

    /// User-code attempts of a signed-in app (`/device/inspect`, `/device/approve`): per approving
    /// session, outside the anonymous bucket, so a flood of guesses at `/device` cannot stop a
    /// person's own app from approving.
    func checkUserCode(approver sid: String, logger: Logger) async -> RelayError? {
        await checkUserCode(guesser: ("uc-sid", sid, settings.userCodesPerIP, "user_codes_app"), everyone: false, logger: logger)
    }

    private func checkUserCode(guesser: (bucket: String, id: String, limit: Int, label: String), everyone: Bool, logger: Logger) async -> RelayError? {
        guard settings.enabled else { return nil }
        let window = max(1, Int(settings.window.components.seconds))
        let now = sessions.clock.seconds
        let index = now / window
        do {
            let fromHere = try await sessions.countRequest(bucket: guesser.bucket, id: guesser.id, window: index, length: .seconds(window))
            let fromAll = everyone ? try await sessions.countRequest(bucket: "uc", id: "all", window: index, length: .seconds(window)) : 0
            if fromHere == guesser.limit + 1 || fromAll == settings.userCodes + 1 {
                logger.warning("user-code attempts over the limit")
                events.record(.rateLimited, reason: RelayError.Code.tooManyRequests.rawValue, [("limit", fromAll > settings.userCodes ? "user_codes" : guesser.label)])
            }
            if fromHere > guesser.limit || fromAll > settings.userCodes {
                return .tooManyRequests(retryAfter: (index + 1) * window - now)
            }
        } catch {
            return .storeUnavailable
        }
        return nil
    }

    /// The limit for the request's client address (through trusted proxies).
    func check(_ request: Request, _ context: RelaisRequestContext) async -> RelayError? {
        await check(ip: IPNetwork.limitKey(ClientAddress.resolve(request, context: context, trustedProxies: trustedProxies)), logger: context.logger)
    }
}
