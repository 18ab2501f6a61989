import RelaisCrypto
import RelaisJOSE

/// The sealed part of a session: who the person is, and the session's own token secret.
struct SessionIdentity: Sendable, Equatable {
    var claims: [String: JSONValue]
    var amr: [String]?
    var authTime: Double?
    /// The provider's id_token, for the logout `id_token_hint`.
    var providerIDToken: String
    /// The key the session's code and refresh tokens are derived from (``SessionTokens``); nil in
    /// an earlier version's identities (Migration/).
    var tokenSecret: [UInt8]?

    init(claims: [String: JSONValue], amr: [String]?, authTime: Double?, providerIDToken: String, tokenSecret: [UInt8]? = SessionTokens.newSecret()) {
        self.claims = claims
        self.amr = amr
        self.authTime = authTime
        self.providerIDToken = providerIDToken
        self.tokenSecret = tokenSecret
    }

    /// The plaintext's first byte; an earlier version's JSON starts with `{`.
    static let compactFormat: UInt8 = 0xD1

    /// The plaintext that is sealed: claims as JSON, the id_token's segments as bytes (a third
    /// smaller than base64url, and the largest part of a session in the store).
    var plaintext: [UInt8] {
        var writer = CompactWriter(format: Self.compactFormat, capacity: 640)
        writer.byte((authTime == nil ? 0 : 1) | (amr == nil ? 0 : 2) | (tokenSecret == nil ? 0 : 4))
        writer.raw(JSONValue.object(claims).serialized())
        writer.segments(providerIDToken)
        if let authTime { writer.double(authTime) }
        if let amr {
            writer.length(amr.count)
            for method in amr { writer.string(method) }
        }
        if let tokenSecret { writer.raw(tokenSecret) }
        return writer.bytes
    }

    /// Either plaintext form; nil for anything else or anything cut short.
    init?(plaintext bytes: [UInt8]) {
        guard var reader = CompactReader(bytes, format: Self.compactFormat) else {
            self.init(earlierVersionJSON: bytes)
            return
        }
        guard let flags = reader.byte(), flags & ~7 == 0, let claimsJSON = reader.raw(), let claims = JSONValue.parse(Array(claimsJSON))?.objectValue,
            let idToken = reader.segments()
        else { return nil }
        self.init(claims: claims, amr: nil, authTime: nil, providerIDToken: idToken, tokenSecret: nil)
        if flags & 1 != 0 {
            guard let value = reader.double() else { return nil }
            authTime = value
        }
        if flags & 2 != 0 {
            guard let count = reader.length(), count <= 64 else { return nil }
            var methods: [String] = []
            for _ in 0..<count {
                guard let method = reader.string() else { return nil }
                methods.append(method)
            }
            amr = methods
        }
        if flags & 4 != 0 {
            guard let secret = reader.raw(), secret.count == SessionTokens.secretBytes else { return nil }
            tokenSecret = Array(secret)
        }
        guard reader.isAtEnd else { return nil }
    }
}
