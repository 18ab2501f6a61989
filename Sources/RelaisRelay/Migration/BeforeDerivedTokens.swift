import Logging
import RelaisClock
import RelaisConfig
import RelaisJOSE
import RelaisStore

// MIGRATION: what Relais wrote before derived tokens (``SessionTokens``, issue 15, replaced on
// 2026-11-24) and sessions may still hold: random refresh tokens with an `rt:` record each
// (``RefreshRecord``), the last refresh under `used:{sid}`, session records as JSON, identities
// sealed as JSON without a token secret, and the sealed answers of rotated tokens. Production code
// reaches it only through the functions below.
//
// DELETE ON OR AFTER 2027-03-01, with `RelayStore.Key.lastUsed` and `.refreshToken`; the callers
// then keep only their current-format branch, and `withTokenSecret` becomes `identity.tokenSecret`.
// Why that date: the last version that wrote these records was replaced on 2026-11-24, and no
// record outlives its session, `sessions.lifetime` after sign-in (90 days by default): every one
// has expired by 2027-02-22; a week more covers a late upgrade. A deployment that runs a longer
// `sessions.lifetime` keeps this file that much longer.

/// What a random refresh token of an earlier version stands for, until its session moves to
/// derived tokens.
struct RefreshRecord: Codable, Sendable {
    var sid: String
    var clientID: String
    var rotatedAt: Double?
    /// The response that replaced this token, sealed, for a retry within the grace window.
    var sealedSuccessor: String?
    /// The thumbprint of the DPoP key the token is bound to: a refresh needs a proof by it.
    var jkt: String?
}

extension RelayStore {
    /// When the session was last refreshed: in its record since derived tokens, under `used:{sid}`
    /// for a session no rotation has touched since an earlier version; nil when never.
    func lastRefreshedIncludingEarlierVersions(_ sid: String, _ session: SessionRecord) async throws -> Double? {
        if let refreshedAt = session.span.refreshedAt { return refreshedAt }
        return try await store.get(Key.lastUsed(sid)).flatMap { Double(String(decoding: $0, as: UTF8.self)) }
    }

    /// The record of a random refresh token an earlier version minted.
    func earlierVersionRefreshRecord(_ token: String) async throws -> RefreshRecord? {
        StoredJSON.decode(RefreshRecord.self, try await store.get(Key.refreshToken(token)))
    }

    /// Moves a session from a random refresh token to derived ones: the session (with its new
    /// identity and generation) replaces the record read as `stored`, and the old token is marked
    /// rotated, so that a later use of it is recognised as a replay.
    fileprivate func adopt(_ token: String, _ sid: String, stored: [UInt8], with session: SessionRecord, rotated: RefreshRecord) async throws -> Bool {
        guard let ttl = ttl(for: session) else { return false }
        return try await replace(sid, stored: stored, with: session, also: [.set(Key.refreshToken(token), StoredJSON.encode(rotated), ttl: ttl)])
    }
}

extension RefreshGrant {
    /// A random refresh token of a session opened by an earlier version: the session moves to
    /// derived tokens (its first is generation 1) and the old token is marked rotated.
    func rotateLegacy(_ request: Request, logger: Logger, attempt: Int = 1) async throws -> JSONValue {
        guard let record = try await sessions.earlierVersionRefreshRecord(request.token) else { throw Self.unknown }
        guard record.clientID == request.app.clientID else { throw RelayError.invalidGrant("the refresh token was issued to another client", .otherClient) }
        try Self.checkBinding(record.jkt, request.proof)
        guard let (session, stored) = try await sessions.storedSession(record.sid), session.clientID == request.app.clientID else {
            throw RelayError.invalidGrant("the session has ended", .sessionEnded)
        }
        let opened = try await vault.openForGrant(session.sealedIdentity, what: "the session", logger: logger)
        if let rotatedAt = record.rotatedAt {
            guard sessions.clock.now - rotatedAt <= Double(grace.components.seconds) else {
                throw try await replayed(record.sid, session, app: request.app, logger: logger)
            }
            try Self.checkAttestation(session, request.attested)
            // Rotated by an earlier version, which sealed its answer in the record; or moved to derived tokens.
            if let sealed = record.sealedSuccessor, let response = vault.open(json: sealed) { return response }
            guard let secret = opened.tokenSecret else { throw try await replayed(record.sid, session, app: request.app, logger: logger) }
            return try issue(request, sid: record.sid, session: session, identity: opened, secret: secret)
        }
        let (identity, sealed, secret) = try vault.withTokenSecret(opened, sealed: session.sealedIdentity)
        var next = session
        next.sealedIdentity = sealed
        next.origin.dpopKey = record.jkt
        next.span.generation = 1
        next.span.refreshedAt = sessions.clock.now
        let response = try issue(request, sid: record.sid, session: next, identity: identity, secret: secret)
        var rotated = record
        rotated.rotatedAt = sessions.clock.now
        if try await sessions.adopt(request.token, record.sid, stored: stored, with: next, rotated: rotated) { return response }
        guard attempt < Self.attempts else { throw RelayError.storeUnavailable }
        return try await rotateLegacy(request, logger: logger, attempt: attempt + 1)
    }
}

extension SessionVault {
    /// The identity with a token secret and its sealed form: an earlier version's identity (from
    /// a code, a session, or the session that approved a device) gets one now, sealed anew.
    func withTokenSecret(_ identity: SessionIdentity, sealed: String) throws -> (identity: SessionIdentity, sealed: String, secret: [UInt8]) {
        if let secret = identity.tokenSecret { return (identity, sealed, secret) }
        var identity = identity
        let secret = SessionTokens.newSecret()
        identity.tokenSecret = secret
        return (identity, try seal(identity), secret)
    }

    /// A token response sealed by an earlier version for its refresh grace window.
    fileprivate func open(json sealed: String) -> JSONValue? {
        guard let decrypted = try? JWE.parse(sealed).decrypt(with: keys.ring.sessionKeys) else { return nil }
        return JSONValue.parse(decrypted.plaintext)
    }
}

extension SessionIdentity {
    /// An earlier version's plaintext: JSON, without a token secret.
    init?(earlierVersionJSON bytes: [UInt8]) {
        guard let json = JSONValue.object(from: bytes), let claims = json["claims"]?.objectValue, let idToken = json["provider_id_token"]?.stringValue else {
            return nil
        }
        self.init(claims: claims, amr: json["amr"]?.arrayValue?.compactMap(\.stringValue), authTime: json["auth_time"]?.numberValue, providerIDToken: idToken, tokenSecret: nil)
    }
}

/// An earlier version's session record: JSON (``SessionRecord/stored`` is compact since).
extension SessionRecord: JSONRecord {
    init?(earlierVersionJSON bytes: [UInt8]) {
        guard let record = StoredJSON.decode(SessionRecord.self, bytes) else { return nil }
        self = record
    }

    init?(json: [String: JSONValue]) {
        guard let clientID = json["client_id"]?.stringValue, let subject = json["sub"]?.stringValue, let providerID = json["idp"]?.stringValue,
            let scopes = json["scopes"]?.arrayValue?.compactMap(\.stringValue), let createdAt = json["created_at"]?.numberValue,
            let expiresAt = json["expires_at"]?.numberValue, let sealed = json["identity"]?.stringValue
        else { return nil }
        self.init(
            clientID: clientID, subject: subject, providerID: providerID, scopes: scopes, acr: json["acr"]?.stringValue, createdAt: createdAt,
            expiresAt: expiresAt, sealedIdentity: sealed
        )
        if let platform = json["attested"]?.stringValue, let key = json["attested_key"]?.stringValue {
            origin.attested = ClientAttested(platform: platform, thumbprint: key)
        }
        origin.device = json["device"]?.stringValue
        origin.approvedBy = json["approved_by"]?.stringValue
    }

    var json: JSONValue {
        var object: [String: JSONValue] = [
            "client_id": .string(clientID), "sub": .string(subject), "idp": .string(providerID), "scopes": .array(scopes.map { .string($0) }),
            "created_at": .number(span.createdAt), "expires_at": .number(span.expiresAt), "identity": .string(sealedIdentity),
        ]
        if let acr { object["acr"] = .string(acr) }
        if let attested = origin.attested {
            object["attested"] = .string(attested.platform)
            object["attested_key"] = .string(attested.thumbprint)
        }
        if let device = origin.device { object["device"] = .string(device) }
        if let approvedBy = origin.approvedBy { object["approved_by"] = .string(approvedBy) }
        return .object(object)
    }
}
