import Hummingbird
import RelaisClock
import RelaisCrypto
import RelaisJOSE
import RelaisServer

/// Verifies a Relais access token presented as `Authorization: Bearer` (RFC 6750): signature with
/// Relais' keys, `typ: at+jwt`, issuer, expiry, and optionally that its session is still live.
/// `/userinfo`, `/auth`, `/introspect` and `POST /logout` share it: it is where a proof of
/// possession of the token's key will plug in.
struct BearerAuthenticator: Sendable {
    let issuer: String
    let keys: RelayKeys
    let sessions: SessionStore
    /// Verified access tokens by their SHA-256, until `exp` (plus the leeway): a gateway presents the
    /// same token many times, and an ES256 verification costs more than the rest of the request.
    let verified = MemoryCache<[UInt8], AccessToken>(capacity: 50_000)

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
    }

    /// How the session is checked: not at all (the JWT alone), or alive (one cheap store lookup).
    enum SessionCheck {
        case none, alive
    }

    func authenticate(_ request: Request, session check: SessionCheck) async throws(RelayError) -> AccessToken {
        guard let header = request.headers[.authorization] else { throw .missingToken }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw .invalidRequest("use the Bearer scheme") }
        let token = String(parts[1].trimmingCharacters(in: " "))
        let access: AccessToken
        do {
            access = try verify(token)
        } catch let error where keys.signingKeysGenerated && error.description != "the access token has expired" {
            // Perhaps signed by another instance's new generated key: check the store once, retry.
            await keys.synchronize(afterFailure: true)
            access = try verify(token)
        }
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
        verified.put(key, access, expiresAt: expiration + Double(Self.leeway.components.seconds), now: now)
        return access
    }
}
