public import RelaisStore

/// Operator actions on sessions (`relais sessions ...`), straight on the store.
public enum SessionAdministration {
    /// Ends every session of `subject` at `provider` (all apps); returns how many ended.
    public static func revokeAll(subject: String, provider: String, store: any KeyValueStore) async throws -> Int {
        let index = RelayKeys.subjectSessions(provider: provider, subject: subject)
        var count = 0
        for sid in try await store.setMembers(index) {
            if try await store.delete(RelayKeys.session(sid)) { count += 1 }
            try await store.setRemove(index, member: sid)
        }
        return count
    }
}
