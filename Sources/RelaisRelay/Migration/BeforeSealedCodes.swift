import RelaisConfig
import RelaisCrypto
import RelaisStore

// MIGRATION: the authorization codes of versions before sealed codes (``SealedCode``, 2026-11-27):
// `<sid>.<mac>`, derived from the session's token secret, its sign-in stored under
// `code:{sid}:<hash>` for `relay.code_lifetime`. During a rolling upgrade an older instance may
// still mint one; a newer instance redeems it from that record (taking it as before) and
// recognises its replay by the derivation. An older instance cannot read a sealed code, so while
// one still runs, `relay.code_format: stored` makes the newer ones mint this kind too.
// Production code reaches it only through the functions below.
//
// DELETE ON OR AFTER 2026-12-11, with `RelayStore.Key.code` and `relay.code_format` (read for one
// more release with a deprecation warning); ``AuthorizationCodeGrant`` and ``CallbackRoute`` then
// keep only their sealed branch. Why that date: no stored code outlives `relay.code_lifetime` (60 s
// by default) after the last older instance stops, and a replay of one is recognised only while
// its session lives; two weeks cover a late or slow upgrade.

extension RelayStore {
    /// Mints a code as an earlier version did (`relay.code_format: stored`) and stores its sign-in.
    func saveStoredCode(_ record: RelayCode, sid: String, secret: [UInt8]) async throws -> String {
        let code = SessionTokens.storedCode(sid: sid, secret: secret)
        try await store.set(Key.code(code), StoredJSON.encode(record), ttl: settings.codeLifetime)
        return code
    }

    /// A code an earlier version stored, read without consuming it; the session opens by taking
    /// `once` (its key). Nil when it is gone or was never stored.
    func storedCode(_ code: String) async throws -> (record: RelayCode, once: OneTimeKey)? {
        let key = Key.code(code)
        return StoredJSON.decode(RelayCode.self, try await store.get(key)).map { ($0, .take(key)) }
    }
}

extension SessionTokens {
    /// The code an earlier version derived for session `sid`.
    static func storedCode(sid: String, secret: [UInt8]) -> String {
        sid + "." + mac(secret, "code", sid)
    }

    /// True when `code` is the code an earlier version derived for this session (constant time).
    static func isStoredCode(_ code: String, sid: String, secret: [UInt8]) -> Bool {
        ConstantTime.equals(Array(code.utf8), Array(storedCode(sid: sid, secret: secret).utf8))
    }
}
