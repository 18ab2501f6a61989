import RelaisClock
import RelaisStore
import RelaisConfig

/// Refresh tokens, their rotation locks, logout transactions and replay memory.
extension SessionStore {
    /// Rotation in one atomic step: the successor refresh token exists exactly when the old one is
    /// marked rotated, and the session's last use is now (all carry the session's hash tag).
    func rotate(_ token: String, to rotated: RefreshRecord, successor: IssuedRefresh, ttl: Duration) async throws {
        try await store.apply([
            .set(Key.refreshToken(successor.token), StoredJSON.encode(successor.record), ttl: ttl),
            .set(Key.refreshToken(token), StoredJSON.encode(rotated), ttl: ttl),
            .set(Key.lastUsed(successor.record.sid), Array(String(Int(clock.now)).utf8), ttl: ttl),
        ])
    }

    /// When the session's tokens were last refreshed; nil when they never were.
    func lastUsed(_ sid: String) async throws -> Double? {
        try await store.get(Key.lastUsed(sid)).flatMap { Double(String(decoding: $0, as: UTF8.self)) }
    }

    func refresh(_ token: String) async throws -> RefreshRecord? {
        StoredJSON.decode(RefreshRecord.self, try await store.get(Key.refreshToken(token)))
    }

    /// One rotation per token across every instance: true when `owner` now holds the lock.
    func lockRefresh(_ token: String, owner: [UInt8], lifetime: Duration) async throws -> Bool {
        try await store.setIfAbsent(Key.refreshLock(token), owner, ttl: lifetime)
    }

    /// Releases the lock if `owner` still holds it (it may have expired and passed to another).
    func unlockRefresh(_ token: String, owner: [UInt8]) async {
        _ = try? await store.deleteIfEqual(Key.refreshLock(token), owner)
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
        let key = switch name {
        case .signingKey: Key.signingKey
        case .sessionKey: Key.sessionKey
        case .eventHashKey: Key.eventHashKey
        }
        _ = try await store.setIfAbsent(key, value, ttl: .seconds(10 * 365 * 86400))
        return try await store.get(key)
    }

    enum SharedValue { case signingKey, sessionKey, eventHashKey }
}
