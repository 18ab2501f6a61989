import RelaisClock
import RelaisStore
import RelaisConfig

/// Logout transactions, replay memory, rate-limit counts and values shared by every instance.
extension SessionStore {
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
