import HTTPTypes
import Hummingbird
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import Synchronization

/// Verifies a Relais access token presented as `Authorization: Bearer` (RFC 6750) or, when it is
/// DPoP-bound (`cnf.jkt`), as `Authorization: DPoP` with a proof by its key (RFC 9449 §7):
/// signature with Relais' keys, `typ: at+jwt`, issuer, expiry, the proof, and optionally that its
/// session is still live. `/userinfo`, `/auth`, `/introspect` and `POST /logout` share it.
///
/// A final class: every route shares one, and a gateway asks `/auth` for each of its requests, so
/// passing it around should cost one reference count, not one per member.
final class BearerAuthenticator: Sendable {
    let issuer: String
    let keys: RelayKeys
    let sessions: RelayStore
    let dpop: DPoPGuard
    /// Verified access tokens by their SHA-256, until `exp` (plus the leeway): a gateway presents the
    /// same token many times, and an ES256 verification costs more than the rest of the request.
    /// Bounded in bytes (`memory.verified_tokens`): past it the oldest tokens go and are verified again.
    let verified: MemoryCache<DigestKey, AccessToken>

    /// Clock skew tolerated between Relais instances (they sign and check each other's tokens).
    static let leeway: Duration = .seconds(2)

    init(issuer: String, keys: RelayKeys, sessions: RelayStore, dpop: DPoPGuard, cacheBytes: Int = MemorySettings().verifiedTokens) {
        (self.issuer, self.keys, self.sessions, self.dpop) = (issuer, keys, sessions, dpop)
        verified = MemoryCache(maxBytes: cacheBytes)
    }

    var clock: any RelaisClock { sessions.clock }

    /// What a verified access token says, read out of its claims once when it is verified (the
    /// verified-token cache hands the same object to every later request with the token). The
    /// claims themselves are not kept: what is read of them is here.
    final class AccessToken: Sendable {
        let subject: String
        let clientID: String
        let sid: String
        let scopes: [String]
        /// acr, idp, auth_time, aud, scope as issued, cnf.jkt and attested.
        let facts: Facts
        /// The RFC 7662 answer for this token while its session lives (`active`, `token_type` and
        /// its claims), serialised once.
        let introspection: [UInt8]

        struct Facts: Sendable {
            var acr: String?
            /// The provider the person signed in with (`idp`).
            var providerID: String?
            var authTime: Double?
            var audiences: [String]
            /// `scope` as issued: space-separated.
            var scope: String
            /// The thumbprint of the DPoP key the token is bound to.
            var jkt: String?
            /// How the app instance was attested, when it was.
            var attested: String?
        }

        var acr: String? { facts.acr }
        var jkt: String? { facts.jkt }
        var attested: String? { facts.attested }

        /// `/auth`'s answer headers for this token, built at its first forward-auth check and kept
        /// with it (counted in ``heapBytes``): a gateway asks about the same token again and again.
        private let forwardHeaders = Mutex<(names: [HTTPField.Name], fields: HTTPFields)?>(nil)

        /// The headers `build` makes for these header names, built once per token (again if a
        /// reload renamed them).
        func forwardHeaders(names: [HTTPField.Name], build: () -> HTTPFields) -> HTTPFields {
            if let kept = forwardHeaders.withLock({ $0 }), kept.names == names { return kept.fields }
            let fields = build()
            forwardHeaders.withLock { $0 = (names, fields) }
            return fields
        }

        /// The claims a resource server is told (RFC 7662 §2.2, RFC 9449 §6.2 for `cnf`).
        static let introspected = ["sub", "client_id", "scope", "exp", "iat", "iss", "aud", "acr", "sid", "jti", "idp", "cnf", "attested"]

        init(subject: String, clientID: String, sid: String, claims: VerifiedClaims) {
            let scope = claims.string("scope") ?? ""
            (self.subject, self.clientID, self.sid) = (subject, clientID, sid)
            scopes = scope.split(separator: " ").map(String.init)
            facts = Facts(
                acr: claims.acr, providerID: claims.string("idp"), authTime: claims["auth_time"]?.numberValue, audiences: claims.audience, scope: scope,
                jkt: claims["cnf"]?.objectValue?["jkt"]?.stringValue, attested: claims.string("attested")
            )
            var answer: [String: JSONValue] = ["active": .bool(true), "token_type": .string(facts.jkt == nil ? "Bearer" : "DPoP")]
            for name in Self.introspected { answer[name] = claims[name] }
            introspection = JSONValue.object(answer).serialized()
        }

        /// What the object holds on the heap, as glibc's allocator hands it out (each block rounded
        /// up to 16 bytes with an 8-byte header, 32 at least): the object, each string too long to
        /// be stored inline (over 15 bytes), the two arrays, the introspection answer, and the
        /// forward-auth headers it may be given (their strings are shared with its own).
        var heapBytes: Int {
            let strings = [subject, clientID, sid, facts.scope, facts.acr ?? "", facts.providerID ?? "", facts.jkt ?? "", facts.attested ?? ""] + scopes + facts.audiences
            let outOfLine = strings.reduce(0) { $0 + ($1.utf8.count > 15 ? Self.block(32 + $1.utf8.count + 1) : 0) }
            let headers = Self.block(64) + Self.block(32 + 8 * MemoryLayout<HTTPField>.stride)
            return Self.block(16 + 240) + headers + outOfLine + Self.block(32 + 16 * scopes.count) + Self.block(32 + 16 * facts.audiences.count)
                + Self.block(32 + introspection.count)
        }

        static func block(_ bytes: Int) -> Int { max(32, (bytes + 8 + 15) & ~15) }
    }

    /// The request a DPoP proof must be for: this endpoint's, or at `/auth` the one the gateway guards.
    struct DPoPTarget: Sendable {
        var method: String
        var url: String
    }

    /// How the session is checked: not at all (the JWT alone), or alive (one cheap store lookup).
    enum SessionCheck {
        case none, alive
    }

    /// `target`: where a DPoP proof must point; nil where none can be checked (a DPoP-bound token is
    /// then refused).
    func authenticate(_ request: Request, session check: SessionCheck, target: DPoPTarget?) async throws(RelayError) -> AccessToken {
        guard let header = try Self.authorization(request) else { throw .missingToken }
        guard let (presentedAsDPoP, token) = Self.credentials(header) else { throw .invalidRequest("use the Bearer or DPoP scheme") }
        let access: AccessToken
        do throws(RelayError) {
            do {
                access = try verify(token)
            } catch let error where error.tokenFault == .unknownKey {
                guard let again = try await keys.retryingOnUnknownKey(.signing, { () throws(RelayError) -> AccessToken? in try verify(token) }) else { throw error }
                access = again
            }
        } catch {
            throw Self.inScheme(error, dpop: presentedAsDPoP)
        }
        // Awaited only for a DPoP-bound token or proof: a gateway's Bearer requests do not suspend here.
        if access.jkt != nil || presentedAsDPoP {
            try await checkBinding(access, token: String(token), presentedAsDPoP: presentedAsDPoP, request: request, target: target)
        }
        guard check == .alive, !sessions.knownLive(access.sid) else { return access }
        let live: Bool
        do {
            live = try await sessions.isLive(access.sid)
        } catch {
            throw .storeUnavailable
        }
        guard live else { throw Self.inScheme(.invalidToken("the session has ended"), dpop: presentedAsDPoP) }
        return access
    }

    /// RFC 9449 §7.1: a token presented with the DPoP scheme (a bound one, past ``checkBinding``)
    /// is refused with a `DPoP` challenge, not a `Bearer` one.
    private static func inScheme(_ error: RelayError, dpop: Bool) -> RelayError {
        var error = error
        if dpop { error.challengesDPoP = true }
        return error
    }

    /// ``authenticate(_:session:target:)``'s answer when memory alone gives it: a Bearer token
    /// verified before (same cache, same expiry) and, when asked, a session this instance knows
    /// live. nil means "authenticate", never "refused": every refusal is the full path's to word.
    func authenticateFromMemory(_ request: Request, session check: SessionCheck) -> AccessToken? {
        guard let header = try? Self.authorization(request), let (presentedAsDPoP, token) = Self.credentials(header), !presentedAsDPoP,
            let access = verified.get(DigestKey(hashing: token), now: clock.now), access.jkt == nil,
            check == .none || sessions.knownLive(access.sid)
        else { return nil }
        return access
    }

    /// The `Authorization` header's value; nil when there is none. Two of them are refused rather
    /// than joined (RFC 6750 §3.1: one method per request).
    static func authorization(_ request: Request) throws(RelayError) -> String? {
        switch request.headers.occurrence(of: .authorization) {
        case .absent: nil
        case .once(let value): value
        case .repeated: throw .invalidRequest("send one Authorization header, not several")
        }
    }

    /// The scheme (case-insensitive, RFC 9110 §11.1) and the token of an `Authorization` header:
    /// `Bearer <token>` or `DPoP <token>`, spaces around the token ignored. Read on the bytes: this
    /// runs for every request a gateway forwards.
    static func credentials(_ header: String) -> (dpop: Bool, token: Substring)? {
        var utf8 = Substring(header).utf8
        guard let space = utf8.firstIndex(of: UInt8(ascii: " ")) else { return nil }
        let scheme = utf8[..<space]
        let dpop: Bool
        if Self.equalsIgnoringCase(scheme, "bearer") {
            dpop = false
        } else if Self.equalsIgnoringCase(scheme, "dpop") {
            dpop = true
        } else {
            return nil
        }
        utf8 = utf8[utf8.index(after: space)...]
        while utf8.first == UInt8(ascii: " ") { utf8.removeFirst() }
        while utf8.last == UInt8(ascii: " ") { utf8.removeLast() }
        guard !utf8.isEmpty else { return nil }
        return (dpop, Substring(utf8))
    }

    private static func equalsIgnoringCase(_ bytes: Substring.UTF8View, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        return zip(bytes, UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)).allSatisfy { $0 | 0x20 == $1 }
    }

    /// RFC 9449 §7: a bound token comes with the DPoP scheme and a fresh proof by its key, for this
    /// request; an unbound one with the Bearer scheme.
    private func checkBinding(_ access: AccessToken, token: String, presentedAsDPoP: Bool, request: Request, target: DPoPTarget?) async throws(RelayError) {
        guard let jkt = access.jkt else {
            if presentedAsDPoP { throw .invalidToken("this token is not DPoP-bound: present it with the Bearer scheme") }
            return
        }
        guard presentedAsDPoP else {
            var error = RelayError.invalidToken("this token is DPoP-bound: present it with the DPoP scheme and a proof")
            error.challengesDPoP = true
            throw error
        }
        guard let target else {
            var error = RelayError.invalidRequest("a DPoP-bound token needs the guarded request described (X-Forwarded-Method, -Proto, -Host, -Uri from a trusted proxy)")
            error.challengesDPoP = true
            throw error
        }
        let proof: DPoPProof
        do {
            proof = try await dpop.resourceProof(request, accessToken: token, method: target.method, url: target.url)
        } catch let error as RelayError {
            throw error
        } catch {
            throw .storeUnavailable
        }
        guard proof.thumbprint == jkt else { throw .invalidDPoPProof("the proof is not signed by the key the token is bound to") }
    }

    /// A token JOSE refused, with what the relay may do about it (``RelayError/tokenFault``).
    static func refusal(_ error: JOSEError) -> RelayError {
        guard error.failedCheck != .expiration else {
            var expired = RelayError.invalidToken("the access token has expired")
            expired.tokenFault = .expired
            return expired
        }
        var refused = RelayError.invalidToken("the access token is not valid (\(error.code))")
        if case .noMatchingKey = error { refused.tokenFault = .unknownKey }
        return refused
    }

    /// The signature and claims, remembered per token until it expires.
    func verify(_ token: some StringProtocol) throws(RelayError) -> AccessToken {
        let now = clock.now
        let key = DigestKey(hashing: token)
        if let cached = verified.get(key, now: now) { return cached }
        let claims: VerifiedClaims
        do {
            let jws = try JWS.parse(String(token))
            try jws.verify(with: keys.ring.signingKeys)
            var policy = ClaimsPolicy(issuer: issuer, now: { [clock] in clock.now })
            policy.expectedType = "at+jwt"
            policy.leeway = Self.leeway
            policy.requiredClaims = ["sub", "client_id", "sid", "scope"]
            claims = try policy.validate(jws)
        } catch {
            throw Self.refusal(error)
        }
        guard let subject = claims.subject, let clientID = claims.string("client_id"), let sid = claims.string("sid"), let expiration = claims.expiration else {
            throw .invalidToken("the access token lacks sub, client_id, sid or exp")
        }
        let access = AccessToken(subject: subject, clientID: clientID, sid: sid, claims: claims)
        // The key is inline in the cache's slots (counted in its entry overhead).
        verified.put(key, access, bytes: access.heapBytes, expiresAt: expiration + Double(Self.leeway.components.seconds), now: now)
        return access
    }
}
