import RelaisStore

/// Session codes (an app's tokens exchanged for a web session in its webview) and the web sessions
/// they open. Both are keyed by hash and carry their session's tag, so a code is consumed and its
/// web session written in one atomic step.
extension RelayStore {
    /// How long a session code may wait for the webview.
    static let sessionCodeLifetime: Duration = .seconds(60)

    /// What a session code opens: a web session of `sid`, then a redirect to `target`.
    struct SessionCodeRecord: Codable, Sendable, Equatable {
        var sid: String
        var clientID: String
        var target: String
    }

    func saveSessionCode(_ code: String, _ record: SessionCodeRecord) async throws {
        try await store.set(Key.sessionCode(code), StoredJSON.encode(record), ttl: Self.sessionCodeLifetime)
    }

    /// Consumes `code` and, in the same step, opens the web session `cookie` for `ttl`. Nil when the
    /// code is unknown, expired or already used: then nothing is written.
    func openWebSession(code: String, cookie: String, ttl: Duration) async throws -> SessionCodeRecord? {
        let taken = try await store.take(Key.sessionCode(code), applying: [.set(Key.webSession(cookie), Array("1".utf8), ttl: ttl)])
        return StoredJSON.decode(SessionCodeRecord.self, taken)
    }

    /// Whether the web session `cookie` is still open (its session is checked separately).
    func webSessionIsOpen(_ cookie: String) async throws -> Bool {
        if case .expiresIn = try await store.timeToLive(Key.webSession(cookie)) { return true }
        return false
    }

    /// Closes one web session (sign-out in the browser).
    func closeWebSession(_ cookie: String) async throws {
        _ = try await store.delete(Key.webSession(cookie))
    }
}
