import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisStore

/// The relay's only door to the store: every key, TTL and index is named here and nowhere else.
/// Tokens and states are stored under their SHA-256, never as themselves; codes are not stored at
/// all (``SealedCode``), only their used-marks.
struct RelayStore: Sendable {
    let store: any KeyValueStore
    let settings: RelaySettings
    let clock: any RelaisClock
    /// The relay's in-process knowledge of live sessions; nil for one-off tools (`relais sessions`).
    var liveness: SessionLiveness? = nil

    /// The key layout (docs/operations.md describes it for operators). The keys of one session carry
    /// its id as a hash tag (`{sid}`), so the multi-key steps below stay on one Redis Cluster node;
    /// codes and refresh tokens start with that id (`<sid>.…`) so it can be found from them.
    enum Key {
        static func transaction(_ state: String) -> String { "tx:\(SHA256.hexHash(state))" }
        /// A sealed code's used-mark (``SealedCode``): set when the code opens its session, or is burned.
        static func usedCode(_ sid: String) -> String { "code-used:{\(sid)}" }
        /// A code stored by a version before sealed codes (Migration/BeforeSealedCodes.swift).
        static func code(_ code: String) -> String { "code:\(tag(of: code)):\(SHA256.hexHash(code))" }
        static func session(_ sid: String) -> String { "session:{\(sid)}" }
        /// Written by versions before derived tokens (``SessionTokens``): the last refresh, and one
        /// record per random refresh token. Read by Migration/ only, and deleted with it.
        static func lastUsed(_ sid: String) -> String { "used:{\(sid)}" }
        static func refreshToken(_ token: String) -> String { "rt:\(tag(of: token)):\(SHA256.hexHash(token))" }
        static func subjectSessions(provider: String, subject: String) -> String { "sub:\(SHA256.hexHash(provider + "\u{0}" + subject))" }
        /// Relais sessions opened from one provider session (its `sid`).
        static func providerSessions(provider: String, sid: String) -> String { "psid:\(SHA256.hexHash(provider + "\u{0}" + sid))" }
        static func logout(_ state: String) -> String { "logout:\(SHA256.hexHash(state))" }
        /// A session `POST /logout` ended, kept a transaction lifetime for the provider's logout
        /// (``RelayStore/keepSignedOut(_:stored:)``).
        static func signedOut(_ sid: String) -> String { "signed-out:{\(sid)}" }
        /// A back-channel logout token's `jti`, remembered so a token acts once.
        static func logoutToken(provider: String, jti: String) -> String { "bcl-jti:\(SHA256.hexHash(provider + "\u{0}" + jti))" }
        /// A DPoP proof already used, by its key and `jti`.
        static func dpopProof(thumbprint: String, tokenID: String) -> String { "dpop-jti:\(SHA256.hexHash(thumbprint + "\u{0}" + tokenID))" }
        static func attestationChallenge(_ challenge: String) -> String { "attest-ch:\(SHA256.hexHash(challenge))" }
        /// An App Attest key and its counter-marker share a hash tag: the counter moves in one atomic step.
        static func appAttestKey(clientID: String, keyID: String) -> String { "appattest:{\(SHA256.hexHash(clientID + "\u{0}" + keyID))}" }
        static func appAttestCounter(clientID: String, keyID: String, counter: UInt32) -> String { appAttestKey(clientID: clientID, keyID: keyID) + ":n:\(counter)" }
        static func attestationProof(thumbprint: String, tokenID: String) -> String { "attest-jti:\(SHA256.hexHash(thumbprint + "\u{0}" + tokenID))" }
        /// A session code and the web sessions opened with one carry their session's tag.
        static func sessionCode(_ code: String) -> String { "sc:\(tag(of: code)):\(SHA256.hexHash(code))" }
        static func webSession(_ cookie: String) -> String { "web:\(tag(of: cookie)):\(SHA256.hexHash(cookie))" }
        /// A device request (RFC 8628) lives under the session it will open: the device code
        /// names it, and its decision and poll marker share its tag.
        static func deviceCode(sid: String, hash: String) -> String { "dc:{\(sid)}:\(hash)" }
        static func usedDeviceCode(sid: String, hash: String) -> String { "dc-used:{\(sid)}:\(hash)" }
        static func deviceDecision(_ sid: String) -> String { "dc-decision:{\(sid)}" }
        static func devicePoll(_ sid: String) -> String { "dc-poll:{\(sid)}" }
        /// The device sessions an app's session approved (members: their ids): they end with it.
        static func approvedSessions(_ sid: String) -> String { "approved:{\(sid)}" }
        /// The user code's first half finds the request; its second half is checked against it.
        static func userCode(handle: String) -> String { "uc:\(SHA256.hexHash(handle))" }
        static func rateLimit(_ bucket: String, _ id: String, window index: Int) -> String { "rl:\(bucket):\(id):\(index)" }
        static let signingKey = "relay:signing-key"
        static let rsaSigningKey = "relay:rsa-signing-key"
        static let sessionKey = "relay:session-key"
        /// The key of security events' sid and sub hashes, when none is configured.
        static let eventHashKey = "relay:event-hash-key"

        /// The session tag of a code or refresh token; `{-}` for a string that carries none (no
        /// such key is ever written, so the lookup simply misses).
        static func tag(of token: String) -> String { "{\(sessionID(in: token) ?? "-")}" }
    }

    /// A new session id: 128 random bits, lowercase hex.
    static func newSessionID() -> String { Hex.encode(SecureRandom.bytes(16)) }

    /// A random one-time token for session `sid` (a device code): the id, a dot, 256 random bits.
    /// Codes are sealed (``SealedCode``) and refresh tokens derived (``SessionTokens``) instead.
    static func newToken(for sid: String) -> String { sid + "." + SecureRandom.token(bits: 256) }

    /// The session id a code or refresh token starts with, when it has a shape Relais mints.
    static func sessionID(in token: String) -> String? {
        let utf8 = token.utf8
        guard utf8.count > 33, let dot = utf8.firstIndex(of: UInt8(ascii: ".")), utf8.distance(from: utf8.startIndex, to: dot) == 32,
            utf8[..<dot].allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        return String(token[..<dot])
    }

    // MARK: - Sign-in: transactions and codes

    func saveTransaction(_ transaction: LoginTransaction, state: String) async throws {
        try await store.set(Key.transaction(state), StoredJSON.encode(transaction), ttl: settings.transactionLifetime)
    }

    /// Consumed on read: a replayed callback finds nothing.
    func takeTransaction(state: String) async throws -> LoginTransaction? {
        StoredJSON.decode(LoginTransaction.self, try await store.getAndDelete(Key.transaction(state)))
    }

    /// What makes a sealed code (``SealedCode``) good once: its used-mark, claimed by the step that
    /// opens its session (which also refuses to write over a session that exists). The mark
    /// outlives the code's own deadline (`expiresAt`, as the sealing instance set it, whatever this
    /// one's `code_lifetime` is now) by five minutes of clock difference between instances; after
    /// that the code itself is refused as expired.
    func usedMark(ofCodeFor sid: String, expiresAt: Double) -> OneTimeKey {
        let left = max(0, expiresAt - clock.now)
        return .claim(Key.usedCode(sid), mark: [1], ttl: .milliseconds(Int64((left * 1000).rounded(.up))) + .seconds(300))
    }

    /// Burns a code that failed its checks (wrong client, redirect or verifier): its used-mark is
    /// set (a stored code of an earlier version: deleted). False when the code was used already.
    func burnCode(_ once: OneTimeKey) async throws -> Bool {
        switch once {
        case .take(let key): try await store.delete(key)
        case .claim(let key, let mark, let ttl): try await store.setIfAbsent(key, mark, ttl: ttl)
        }
    }

    // MARK: - Sessions

    /// How long the session record lives from now: the idle timeout, never past the absolute end.
    func ttl(for session: SessionRecord) -> Duration? {
        let remaining = session.span.expiresAt - clock.now
        guard remaining > 1 else { return nil }
        return min(settings.sessionIdleTimeout, .seconds(Int(remaining)))
    }

    /// Opens session `sid` in one atomic step with what lets it open once (`once`: a sealed code's
    /// used-mark claimed, a device code taken): both happen, or neither. A replayed code is then
    /// recognised by its mark, or by the session it opened.
    /// The person's indexes are written in the same step on one Redis server (one round trip), and
    /// before it on a cluster, where they live on other nodes: an index entry without its session
    /// is harmless (readers skip ended sessions), a session missing from its index could not be
    /// found by a back-channel logout. The session's own keys carry its hash tag.
    /// Nil when `once` did not hold (another request opened or burned it first); otherwise the
    /// sessions ended to keep the person within `sessions.max_per_subject`.
    func open(
        _ session: SessionRecord, sid: String, providerSessionID: String?, once: OneTimeKey, also writes: [StoreWrite]
    ) async throws -> [String]? {
        // A person over the limit is listed by the same step, for the trim that follows.
        var indexes = [
            SetMembership(
                Key.subjectSessions(provider: session.providerID, subject: session.subject), member: sid, ttl: settings.sessionLifetime,
                listedAbove: settings.maxSessionsPerSubject)
        ]
        if let providerSessionID {
            indexes.append(SetMembership(Key.providerSessions(provider: session.providerID, sid: providerSessionID), member: sid, ttl: settings.sessionLifetime))
        }
        let lifetime = ttl(for: session) ?? .seconds(1)
        guard let opened = try await store.once(once, applying: [.set(Key.session(sid), session.stored, ttl: lifetime)] + writes, indexing: indexes) else {
            return nil
        }
        guard let members = opened.listed.first ?? nil else { return [] }
        // The session is open: a failure here must not undo the sign-in; the next one trims again.
        return (try? await trimSessions(provider: session.providerID, subject: session.subject, keeping: sid, among: members)) ?? []
    }

    /// Keeps a person within `sessions.max_per_subject` live sessions: ended sessions leave their
    /// index, and the oldest live ones beyond the limit are revoked (never `keeping`, just opened).
    /// Returns the revoked ids. Runs only when a sign-in finds the index over the limit, with its
    /// `members` as the step that opened the session listed them.
    func trimSessions(provider: String, subject: String, keeping newest: String, among members: Set<String>) async throws -> [String] {
        let index = Key.subjectSessions(provider: provider, subject: subject)
        var live: [(sid: String, createdAt: Double)] = []
        // Every person at the limit pays this on each sign-in: the records come in batched reads
        // (one round trip for the default limit), not one read each, and only their lifetimes are
        // kept, so that a high limit does not hold every record at once.
        var ended: [String] = []
        let now = clock.now
        try await forEachBatch(ofSessions: Array(members), reading: SessionRecord.lifetime(stored:)) { batch in
            for (sid, lifetime) in batch {
                if let lifetime, lifetime.expiresAt > now { live.append((sid, lifetime.createdAt)) } else { ended.append(sid) }
            }
        }
        // Ended ones leave the index, 32 at a time: one grown large before the limit existed stays cheap.
        for start in stride(from: 0, to: ended.count, by: 32) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for sid in ended[start..<min(start + 32, ended.count)] { group.addTask { _ = try await store.setRemove(index, member: sid) } }
                try await group.waitForAll()
            }
        }
        let excess = live.count - settings.maxSessionsPerSubject
        guard excess > 0 else { return [] }
        var revoked: [String] = []
        for (sid, _) in live.filter({ $0.sid != newest }).sorted(by: { ($0.createdAt, $0.sid) < ($1.createdAt, $1.sid) }).prefix(excess)
        where try await end(sid, leaving: index, reason: .overLimit) {
            revoked.append(sid)
        }
        return revoked
    }

    func session(_ sid: String) async throws -> SessionRecord? {
        try await storedSession(sid)?.record
    }

    /// What `read` makes of the stored records of `sids` (nil for a missing one), read a batch at
    /// a time (one round trip each on Redis): `body` gets each batch, so that a person's many
    /// sessions are never all in memory at once.
    func forEachBatch<Read>(
        ofSessions sids: [String], reading read: ([UInt8]?) -> Read?, _ body: ([(String, Read?)]) async throws -> Void
    ) async throws {
        for start in stride(from: 0, to: sids.count, by: RedisStore.readBatch) {
            let batch = sids[start..<min(start + RedisStore.readBatch, sids.count)]
            try await body(zip(batch, try await store.getMany(batch.map(Key.session)).map(read)).map { ($0, $1) })
        }
    }

    /// The live sessions among `sids` (nil for one that ended), a batch at a time as above.
    func forEachBatch(ofLiveSessions sids: [String], _ body: ([(String, SessionRecord?)]) async throws -> Void) async throws {
        let now = clock.now
        try await forEachBatch(ofSessions: sids, reading: { SessionRecord(stored: $0).flatMap { $0.span.expiresAt > now ? $0 : nil } }, body)
    }

    /// The session and the bytes it was read from, for ``replace(_:stored:with:)``.
    func storedSession(_ sid: String) async throws -> (record: SessionRecord, stored: [UInt8])? {
        guard let stored = try await store.get(Key.session(sid)), let session = SessionRecord(stored: stored), session.span.expiresAt > clock.now else { return nil }
        return (session, stored)
    }

    /// Writes `session` in place of the record read as `stored`, pushing its idle deadline back,
    /// with `writes` in the same atomic step; false when the record changed or ended since the read
    /// (another rotation, a revocation), in which case nothing is written.
    func replace(_ sid: String, stored: [UInt8], with session: SessionRecord, also writes: [StoreWrite] = []) async throws -> Bool {
        guard let ttl = ttl(for: session) else { return false }
        return try await store.apply([.set(Key.session(sid), session.stored, ttl: ttl)] + writes, ifEqual: Key.session(sid), stored)
    }

    /// Whether the session exists, without reading it: the store's TTL already enforces both the
    /// idle timeout and the absolute lifetime. Answered in process when ``SessionLiveness`` knows.
    func isLive(_ sid: String) async throws -> Bool {
        let now = clock.now
        if let liveness, liveness.knowsLive(sid, now: now) { return true }
        return try await readLiveness(sid, now: now)
    }

    /// True when this instance already knows `sid` live, without asking the store (false means
    /// "ask with ``isLive(_:)``", never "ended"). Synchronous, so the session checks of a gateway's
    /// requests do not enter an async function when the answer is in memory.
    func knownLive(_ sid: String) -> Bool {
        liveness?.knowsLive(sid, now: clock.now) ?? false
    }

    private func readLiveness(_ sid: String, now: Double) async throws -> Bool {
        let epoch = liveness?.currentEpoch
        guard case .expiresIn(let remaining) = try await store.timeToLive(Key.session(sid)) else { return false }
        if let liveness, let epoch {
            liveness.remember(sid, until: now + Double(remaining.components.seconds), now: now, readSince: epoch)
        }
        return true
    }

    /// The idle time left, nil once the session has ended.
    func idleRemaining(_ sid: String) async throws -> Duration? {
        if case .expiresIn(let remaining) = try await store.timeToLive(Key.session(sid)) { return remaining }
        return nil
    }

    /// Pushes the idle deadline back (bounded by the absolute lifetime).
    func touch(_ sid: String, _ session: SessionRecord) async throws {
        guard let ttl = ttl(for: session) else { return }
        _ = try await store.expire(Key.session(sid), ttl: ttl)
    }

    /// Ends a session: its refresh tokens and access tokens stop working (they are checked against
    /// it). Counted under `reason` when it was still there; true when it was.
    @discardableResult
    func revoke(_ sid: String, reason: RelayMetrics.EndReason) async throws -> Bool {
        let session = SessionRecord(stored: try await store.get(Key.session(sid)))
        return try await end(sid, leaving: session.map { Key.subjectSessions(provider: $0.providerID, subject: $0.subject) }, reason: reason)
    }

    /// Ends a session, and it leaves its person's `index` when known; true when it was live. Never
    /// the other way round: a session left out of its index while it lives could not be found by a
    /// back-channel logout, where an index entry without its session is harmless (readers skip it,
    /// the next trim drops it). So leaving the index is clean-up, best effort: in the deletion's own
    /// step on one Redis server, just after it on a cluster (``KeyValueStore/deleteAnnouncing(_:_:taking:leaving:)``).
    private func end(_ sid: String, leaving index: String?, reason: RelayMetrics.EndReason) async throws -> Bool {
        let ended = try await deleteSession(sid, leaving: index)
        if ended { RelayMetrics.sessionsEnded(1, reason: reason) }
        return ended
    }

    /// Every session id indexed for a person at a provider (some may have ended since).
    func sessions(ofSubject subject: String, provider: String) async throws -> Set<String> {
        try await store.setMembers(Key.subjectSessions(provider: provider, subject: subject))
    }

    /// The Relais sessions opened from one provider session.
    func sessions(ofProviderSession sid: String, provider: String) async throws -> Set<String> {
        try await store.setMembers(Key.providerSessions(provider: provider, sid: sid))
    }

    /// Deletes the session record and tells every instance, whose in-process caches forget it
    /// (``SessionLiveness``); true when it existed.
    func deleteSession(_ sid: String, leaving index: String? = nil) async throws -> Bool {
        defer { liveness?.forget(sid) }
        // The device sessions it approved are taken in the same step: one round trip, not two.
        let (ended, approved) = try await store.deleteAnnouncing(
            Key.session(sid), sid, taking: Key.approvedSessions(sid), leaving: index.map { SetEntry($0, member: sid) })
        await endApprovedSessions(approved, of: sid)
        return ended
    }

    /// Ends every session of a person at a provider (all apps) and empties their index; how many
    /// were live. The operator's way (`relais sessions revoke`, `/admin/sessions/revoke`). Each
    /// session leaves the index with its deletion, as clean-up (``end(_:leaving:reason:)``): an
    /// index that cannot be trimmed never stops the sessions after it from ending.
    func endAll(ofSubject subject: String, provider: String) async throws -> Int {
        let index = Key.subjectSessions(provider: provider, subject: subject)
        var ended = 0
        for sid in try await sessions(ofSubject: subject, provider: provider) {
            if try await deleteSession(sid, leaving: index) { ended += 1 }
        }
        return ended
    }
}
