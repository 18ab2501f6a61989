import RelaisCrypto

/// A session's refresh tokens, derived from its own secret (sealed in its identity) rather than
/// drawn at random and listed in the store: `<sid>.<generation>.<mac>` for the refresh token of
/// each rotation (its authorization code is sealed instead, ``SealedCode``; the derived codes of
/// earlier versions are read in Migration/BeforeSealedCodes.swift). Any token the session ever
/// issued is recognised, so a replayed one ends the session however old it is, while the store
/// keeps one record per session whatever the number of refreshes, and a reader of the store alone
/// cannot mint a token (the secret is sealed with the relay's session key).
enum SessionTokens {
    /// 160 bits: the key of the HMAC behind every token of the session.
    static let secretBytes = 20
    /// 160 bits of each token (RFC 6749 §10.10).
    static let macBytes = 20

    static func newSecret() -> [UInt8] { SecureRandom.bytes(secretBytes) }

    static func refreshToken(sid: String, generation: Int, secret: [UInt8]) -> String {
        sid + "." + String(generation) + "." + mac(secret, "refresh \(generation)", sid)
    }

    /// A refresh token of the derived shape: its session and generation. Nil for anything else,
    /// including the random tokens minted before (`<sid>.<random>`).
    static func parseRefresh(_ token: String) -> (sid: String, generation: Int)? {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let sid = RelayStore.sessionID(in: token), parts[1].count <= 9, parts[1].first != UInt8(ascii: "0") || parts[1].count == 1,
            parts[1].allSatisfy({ (0x30...0x39).contains($0) }), let generation = Int(String(decoding: parts[1], as: UTF8.self))
        else { return nil }
        return (sid, generation)
    }

    /// True when `token` is generation `generation` of this session's refresh tokens (constant time).
    static func isRefreshToken(_ token: String, sid: String, generation: Int, secret: [UInt8]) -> Bool {
        ConstantTime.equals(Array(token.utf8), Array(refreshToken(sid: sid, generation: generation, secret: secret).utf8))
    }

    static func mac(_ secret: [UInt8], _ purpose: String, _ sid: String) -> String {
        Base64URL.encode(HMAC.sha256(key: secret, Array("\(purpose) \(sid)".utf8)).prefix(macBytes))
    }
}
