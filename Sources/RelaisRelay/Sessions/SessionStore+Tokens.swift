import RelaisClock
import RelaisStore
import RelaisConfig

/// Refresh tokens written by earlier versions, logout transactions and replay memory.
extension SessionStore {
    /// When the session's tokens were last refreshed; nil when they never were.
    func lastRefreshed(_ sid: String, _ session: SessionRecord) async throws -> Double? {
        if let refreshedAt = session.span.refreshedAt { return refreshedAt }
        return try await store.get(Key.lastUsed(sid)).flatMap { Double(String(decoding: $0, as: UTF8.self)) }
    }

    /// The record of a random refresh token minted before derived tokens (``SessionTokens``).
    func legacyRefresh(_ token: String) async throws -> RefreshRecord? {
        StoredJSON.decode(RefreshRecord.self, try await store.get(Key.refreshToken(token)))
    }

    /// Moves a session from a random refresh token to derived ones: the session (with its new
    /// identity and generation) replaces the record read as `stored`, and the old token is marked
    /// rotated, so that a later use of it is recognised as a replay.
    func adopt(_ token: String, _ sid: String, stored: [UInt8], with session: SessionRecord, rotated: RefreshRecord) async throws -> Bool {
        guard let ttl = ttl(for: session) else { return false }
        return try await replace(sid, stored: stored, with: session, also: [.set(Key.refreshToken(token), StoredJSON.encode(rotated), ttl: ttl)])
    }

    func saveLogout(_ transaction: LogoutTransaction, state: String) async throws {
        try await store.set(Key.logout(state), StoredJSON.encode(transaction), ttl: settings.transactionLifetime)
    }

    func takeLogout(state: String) async throws -> LogoutTransaction? {
        StoredJSON.decode(LogoutTransaction.self, try await store.getAndDelete(Key.logout(state)))
    }

    func logoutTokenSeen(provider: String, jti: String) async throws -> Bool {
        try await store.get(Key.logoutToken(provider: provider, jti: jti)) != nil
    }

    func rememberLogoutToken(provider: String, jti: String, for window: Duration) async throws {
        try await store.set(Key.logoutToken(provider: provider, jti: jti), [1], ttl: window)
    }

    /// True the first time a DPoP proof is seen within `window`, false for a replay.
    func rememberProof(thumbprint: String, tokenID: String, for window: Duration) async throws -> Bool {
        try await store.setIfAbsent(Key.dpopProof(thumbprint: thumbprint, tokenID: tokenID), [1], ttl: window)
    }

    /// Counts one request in fixed window number `index` (shared by every instance); the count so far.
    func countRequest(bucket: String, id: String, window index: Int, length: Duration) async throws -> Int {
        try await store.increment(Key.rateLimit(bucket, id, window: index), window: length)
    }

    /// A value shared by every instance on this store, written once by whichever comes first
    /// (development keys, the security events' hash key). Nil when the store kept nothing.
    func sharedValue(_ name: SharedValue, proposing value: [UInt8]) async throws -> [UInt8]? {
        _ = try await store.setIfAbsent(name.key, value, ttl: .seconds(10 * 365 * 86400))
        return try await store.get(name.key)
    }

    /// ``sharedValue(_:proposing:)`` for a value costly to make (an RSA key): made only when the
    /// store holds none.
    func sharedValue(_ name: SharedValue, making value: () throws -> [UInt8]) async throws -> [UInt8]? {
        if let stored = try await store.get(name.key) { return stored }
        return try await sharedValue(name, proposing: try value())
    }

    enum SharedValue {
        case signingKey, rsaSigningKey, sessionKey, eventHashKey

        var key: String {
            switch self {
            case .signingKey: Key.signingKey
            case .rsaSigningKey: Key.rsaSigningKey
            case .sessionKey: Key.sessionKey
            case .eventHashKey: Key.eventHashKey
            }
        }
    }
}
