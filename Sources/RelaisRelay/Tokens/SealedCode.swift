import RelaisCrypto
import RelaisJOSE

/// An authorization code that carries its sign-in: `<sid>.<JWE>`, the ``RelayCode`` with the
/// session id it will open and its deadline, sealed with the session key (as a session's identity
/// is). `/callback` stores nothing and `/token` reads nothing before the one step that opens the
/// session, which also claims the code's used-mark (``RelayStore/Key/usedCode(_:)``): the code is
/// good once, and a second use finds the mark, or the session the first opened, and ends it.
/// Sealed (AES-256-GCM), the code shows nothing of the person to the browser or app that carries
/// it, and cannot be forged or altered without the session key. About 2 KB long for a
/// FranceConnect identity: RFC 6749 leaves a code's size to the server (§4.1.2). An instance of a
/// version before 2026-11-27 cannot read one: `relay.code_format: stored` during such an upgrade.
struct SealedCode: Sendable {
    var sid: String
    var record: RelayCode
    /// Seconds since 1970, as ``RelaisClock/now``.
    var expiresAt: Double

    /// What sets a code's payload apart from anything else sealed with the session key.
    private static let use = "authorization_code"

    func seal(with vault: SessionVault) throws -> String {
        let payload: JSONValue = .object(["use": .string(Self.use), "sid": .string(sid), "exp": .number(expiresAt), "code": record.json])
        return sid + "." + (try vault.seal(bytes: payload.serialized()))
    }

    /// True for a code of this shape (the session id, a dot, a compact JWE); false for the stored
    /// codes of earlier versions (``RelayStore/storedCode(_:)``).
    static func hasSealedShape(_ code: String) -> Bool {
        RelayStore.sessionID(in: code) != nil && CompactSerialization.dots(in: code) == 5
    }

    /// The code's content when a session key of this instance opens it (after one check of the
    /// keys against the store) and it names the session its prefix names; nil for anything else.
    /// Its deadline is the caller's to check: an expired code still names the session it opened.
    static func open(_ code: String, vault: SessionVault) async -> SealedCode? {
        guard hasSealedShape(code), let sid = RelayStore.sessionID(in: code) else { return nil }
        let sealed = String(code.utf8.dropFirst(sid.utf8.count + 1))!
        func read() -> SealedCode? {
            guard let plaintext = vault.open(bytes: sealed), let payload = JSONValue.object(from: plaintext), payload["use"]?.stringValue == use,
                payload["sid"]?.stringValue == sid, let expiresAt = payload["exp"]?.numberValue,
                let record = payload["code"]?.objectValue.flatMap(RelayCode.init(json:))
            else { return nil }
            return SealedCode(sid: sid, record: record, expiresAt: expiresAt)
        }
        if let opened = read() { return opened }
        return await vault.keys.retryingOnUnknownKey(.session) { read() }
    }
}
