import Hummingbird
import RelaisClock
import RelaisCrypto
import RelaisJOSE
import RelaisServer

/// Verifies a Relais access token presented as `Authorization: Bearer` (RFC 6750) or, when it is
/// DPoP-bound (`cnf.jkt`), as `Authorization: DPoP` with a proof by its key (RFC 9449 §7):
/// signature with Relais' keys, `typ: at+jwt`, issuer, expiry, the proof, and optionally that its
/// session is still live. `/userinfo`, `/auth`, `/introspect` and `POST /logout` share it.
struct BearerAuthenticator: Sendable {
    let issuer: String
    let keys: RelayKeys
    let sessions: SessionStore
    let dpop: DPoPGuard
    /// Verified access tokens by their SHA-256, until `exp` (plus the leeway): a gateway presents the
    /// same token many times, and an ES256 verification costs more than the rest of the request.
    /// 16 MiB, whatever the token size: past it the oldest tokens go and are verified again.
    let verified = MemoryCache<[UInt8], AccessToken>(maxBytes: 16 << 20)

    /// Clock skew tolerated between Relais instances (they sign and check each other's tokens).
    static let leeway: Duration = .seconds(2)

    var clock: any RelaisClock { sessions.clock }

    /// What a verified access token says.
    struct AccessToken: Sendable {
        var subject: String
        var clientID: String
        var sid: String
        var scopes: [String]
        var acr: String?
        var claims: VerifiedClaims
        /// The thumbprint of the DPoP key the token is bound to.
        var jkt: String? { claims["cnf"]?.objectValue?["jkt"]?.stringValue }
        /// How the app instance was attested, when it was.
        var attested: String? { claims.string("attested") }
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
        guard let header = request.headers[.authorization] else { throw .missingToken }
        let parts = header.split(separator: " ", maxSplits: 1)
        let scheme = parts.first?.lowercased()
        guard parts.count == 2, scheme == "bearer" || scheme == "dpop" else { throw .invalidRequest("use the Bearer or DPoP scheme") }
        let token = String(parts[1].trimmingCharacters(in: " "))
        let access: AccessToken
        do {
            access = try verify(token)
        } catch let error where keys.signingKeysGenerated && error.description != "the access token has expired" {
            // Perhaps signed by another instance's new generated key: check the store once, retry.
            await keys.synchronize(afterFailure: true)
            access = try verify(token)
        }
        try await checkBinding(access, token: token, presentedAsDPoP: scheme == "dpop", request: request, target: target)
        guard check == .alive else { return access }
        let live: Bool
        do {
            live = try await sessions.isLive(access.sid)
        } catch {
            throw .storeUnavailable
        }
        guard live else { throw .invalidToken("the session has ended") }
        return access
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
            throw .invalidRequest("a DPoP-bound token needs the guarded request described (X-Forwarded-Method, -Proto, -Host, -Uri from a trusted proxy)")
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

    /// The signature and claims, remembered per token until it expires.
    func verify(_ token: String) throws(RelayError) -> AccessToken {
        let now = clock.now
        let key = SHA256.hash(Array(token.utf8))
        if let cached = verified.get(key, now: now) { return cached }
        let claims: VerifiedClaims
        do {
            let jws = try JWS.parse(token)
            try jws.verify(with: keys.ring.signingKeys)
            var policy = ClaimsPolicy(issuer: issuer)
            policy.expectedType = "at+jwt"
            policy.leeway = Self.leeway
            policy.requiredClaims = ["sub", "client_id", "sid", "scope"]
            policy.now = { [clock] in clock.now }
            claims = try policy.validate(jws)
        } catch {
            throw .invalidToken(error.code == "jwt_exp" ? "the access token has expired" : "the access token is not valid (\(error.code))")
        }
        guard let subject = claims.subject, let clientID = claims.string("client_id"), let sid = claims.string("sid"), let expiration = claims.expiration else {
            throw .invalidToken("the access token lacks sub, client_id, sid or exp")
        }
        let access = AccessToken(
            subject: subject, clientID: clientID, sid: sid, scopes: (claims.string("scope") ?? "").split(separator: " ").map(String.init),
            acr: claims.acr, claims: claims
        )
        // The claims are a view over the decoded payload plus its index: about twice the token.
        verified.put(key, access, bytes: 2 * token.utf8.count + 256, expiresAt: expiration + Double(Self.leeway.components.seconds), now: now)
        return access
    }
}
