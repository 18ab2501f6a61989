import RelaisConfig
import RelaisStore

/// Logout: the transaction between `GET /logout` and the provider's return, and the back-channel
/// logout tokens already acted on.
extension RelayStore {
    func saveLogout(_ transaction: LogoutTransaction, state: String) async throws {
        try await store.set(Key.logout(state), StoredJSON.encode(transaction), ttl: settings.transactionLifetime)
    }

    func takeLogout(state: String) async throws -> LogoutTransaction? {
        StoredJSON.decode(LogoutTransaction.self, try await store.getAndDelete(Key.logout(state)))
    }

    /// A session `POST /logout` is about to end, kept a transaction lifetime: an app that then
    /// opens `GET /logout` with its id_token (docs/client-protocol.md §10) still ends the
    /// provider's session, which needs the provider's own id_token sealed in it.
    func keepSignedOut(_ sid: String, stored: [UInt8]) async throws {
        try await store.set(Key.signedOut(sid), stored, ttl: settings.transactionLifetime)
    }

    /// The session `POST /logout` ended within a transaction lifetime, once.
    func signedOutSession(_ sid: String) async throws -> SessionRecord? {
        SessionRecord(stored: try await store.get(Key.signedOut(sid)))
    }

    func forgetSignedOut(_ sid: String) async throws {
        _ = try await store.delete(Key.signedOut(sid))
    }

    func logoutTokenSeen(provider: String, jti: String) async throws -> Bool {
        try await store.get(Key.logoutToken(provider: provider, jti: jti)) != nil
    }

    func rememberLogoutToken(provider: String, jti: String, for window: Duration) async throws {
        try await store.set(Key.logoutToken(provider: provider, jti: jti), [1], ttl: window)
    }
}
