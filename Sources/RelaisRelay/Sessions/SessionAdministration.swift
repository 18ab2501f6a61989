import RelaisClock
import RelaisConfig
public import RelaisStore

/// Operator actions on sessions (`relais sessions ...`), straight on the store.
public enum SessionAdministration {
    /// What an operator may see of a live session: never its identity claims or tokens.
    public struct Summary: Sendable, Equatable {
        public var sid: String
        public var clientID: String
        public var providerID: String
        public var acr: String?
        public var createdAt: Double
        /// The absolute end (`sessions.lifetime` from sign-in).
        public var endsAt: Double
        /// Time left before the idle timeout ends it, unless it is used.
        public var idleRemaining: Duration
    }

    private static func sessions(_ store: any KeyValueStore) -> RelayStore {
        RelayStore(store: store, settings: RelaySettings(), clock: SystemClock())
    }

    /// The live sessions of `subject` at `provider` (all apps), oldest first.
    public static func list(subject: String, provider: String, store: any KeyValueStore) async throws -> [Summary] {
        let sessions = sessions(store)
        var summaries: [Summary] = []
        for sid in try await sessions.sessions(ofSubject: subject, provider: provider) {
            guard let remaining = try await sessions.idleRemaining(sid), let record = try await sessions.session(sid) else { continue }  // ended since it was indexed
            summaries.append(
                Summary(
                    sid: sid, clientID: record.clientID, providerID: record.providerID, acr: record.acr, createdAt: record.span.createdAt,
                    endsAt: record.span.expiresAt, idleRemaining: remaining
                ))
        }
        return summaries.sorted { ($0.createdAt, $0.sid) < ($1.createdAt, $1.sid) }
    }

    /// Ends every session of `subject` at `provider` (all apps); returns how many ended.
    public static func revokeAll(subject: String, provider: String, store: any KeyValueStore) async throws -> Int {
        try await sessions(store).endAll(ofSubject: subject, provider: provider)
    }
}
