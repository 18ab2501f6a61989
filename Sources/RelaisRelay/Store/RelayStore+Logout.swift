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

    func logoutTokenSeen(provider: String, jti: String) async throws -> Bool {
        try await store.get(Key.logoutToken(provider: provider, jti: jti)) != nil
    }

    func rememberLogoutToken(provider: String, jti: String, for window: Duration) async throws {
        try await store.set(Key.logoutToken(provider: provider, jti: jti), [1], ttl: window)
    }
}
