import FoundationEssentials
import RelaisConfig
import RelaisCrypto
import RelaisServer
import RelaisStore

/// Opens, renews and revokes Relais sessions in the store.
struct SessionLedger: Sendable {
    let store: any KeyValueStore
    let settings: RelaySettings

    static func now() -> Double { Date().timeIntervalSince1970 }

    /// How long the session record lives from now: the idle timeout, never past the absolute end.
    func ttl(for session: SessionRecord) -> Duration? {
        let remaining = session.expiresAt - Self.now()
        guard remaining > 1 else { return nil }
        return min(settings.sessionIdleTimeout, .seconds(Int(remaining)))
    }

    /// Stores the session and indexes it by the provider's subject (and the provider's session id
    /// when known), so an operator or a back-channel logout can find every session of a person.
    func open(_ session: SessionRecord, providerSessionID: String? = nil) async throws -> String {
        let sid = Hex.encode(SecureRandom.bytes(16))
        try await store.set(RelayKeys.session(sid), StoredJSON.encode(session), ttl: ttl(for: session) ?? .seconds(1))
        try await store.setAdd(RelayKeys.subjectSessions(provider: session.providerID, subject: session.subject), member: sid, ttl: settings.sessionLifetime)
        if let providerSessionID {
            try await store.setAdd(RelayKeys.providerSessions(provider: session.providerID, sid: providerSessionID), member: sid, ttl: settings.sessionLifetime)
        }
        return sid
    }

    func get(_ sid: String) async throws -> SessionRecord? {
        guard let session = StoredJSON.decode(SessionRecord.self, try await store.get(RelayKeys.session(sid))), session.expiresAt > Self.now() else { return nil }
        return session
    }

    /// Whether the session exists, without reading it: the store's TTL already enforces both the
    /// idle timeout and the absolute lifetime.
    func isLive(_ sid: String) async throws -> Bool {
        if case .expiresIn = try await store.timeToLive(RelayKeys.session(sid)) { return true }
        return false
    }

    /// Pushes the idle deadline back (bounded by the absolute lifetime).
    func touch(_ sid: String, _ session: SessionRecord) async throws {
        guard let ttl = ttl(for: session) else { return }
        _ = try await store.expire(RelayKeys.session(sid), ttl: ttl)
    }

    /// Ends a session: its refresh tokens and access tokens stop working (they are checked against it).
    /// Counted under `reason` when it was still there.
    func revoke(_ sid: String, reason: RelayMetrics.EndReason) async throws {
        if let session = StoredJSON.decode(SessionRecord.self, try await store.get(RelayKeys.session(sid))) {
            _ = try await store.setRemove(RelayKeys.subjectSessions(provider: session.providerID, subject: session.subject), member: sid)
        }
        if try await store.delete(RelayKeys.session(sid)) { RelayMetrics.sessionsEnded(1, reason: reason) }
    }
}
