import FoundationEssentials
import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisStore

/// Verifies a Relais access token presented as `Authorization: Bearer` (RFC 6750): signature with
/// Relais' keys, `typ: at+jwt`, issuer, expiry, and optionally that its session is still live.
struct AccessTokenCheck: Sendable {
    let relay: Relay

    /// Clock skew tolerated between Relais instances (they sign and check each other's tokens).
    static let leeway: Duration = .seconds(2)

    struct Verified: Sendable {
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

    func verify(_ request: Request, session check: SessionCheck) async -> Result<Verified, BearerFailure> {
        guard let header = request.headers[.authorization] else { return .failure(.missing) }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return .failure(.invalidRequest("use the Bearer scheme")) }
        let token = String(parts[1].trimmingCharacters(in: " "))
        let verified: Verified
        switch verifyToken(token) {
        case .success(let value): verified = value
        case .failure(let failure): return .failure(failure)
        }
        do {
            switch check {
            case .none:
                break
            case .alive:
                guard try await relay.sessions.isLive(verified.sid) else { return .failure(.invalidToken("the session has ended")) }
            }
        } catch {
            return .failure(.unavailable)
        }
        return .success(verified)
    }

    /// The signature and claims, remembered per token until it expires: a gateway presents the same
    /// token many times, and an ES256 verification costs more than the rest of the request.
    func verifyToken(_ token: String) -> Result<Verified, BearerFailure> {
        let now = Date().timeIntervalSince1970
        let key = SHA256.hash(Array(token.utf8))
        if let cached = relay.verifiedTokens.get(key, now: now) { return .success(cached) }
        let claims: VerifiedClaims
        do {
            let jws = try JWS.parse(token)
            try jws.verify(with: relay.keys.signingKeys)
            var policy = ClaimsPolicy(issuer: relay.issuer)
            policy.expectedType = "at+jwt"
            policy.leeway = Self.leeway
            policy.requiredClaims = ["sub", "client_id", "sid", "scope"]
            claims = try policy.validate(jws)
        } catch {
            return .failure(.invalidToken(error.code == "jwt_exp" ? "the access token has expired" : "the access token is not valid (\(error.code))"))
        }
        guard let subject = claims.subject, let clientID = claims.string("client_id"), let sid = claims.string("sid"), let expiration = claims.expiration else {
            return .failure(.invalidToken("the access token lacks sub, client_id, sid or exp"))
        }
        let verified = Verified(
            subject: subject, clientID: clientID, sid: sid, scopes: (claims.string("scope") ?? "").split(separator: " ").map(String.init),
            acr: claims.acr, claims: claims
        )
        relay.verifiedTokens.put(key, verified, expiresAt: expiration + Double(Self.leeway.components.seconds), now: now)
        return .success(verified)
    }
}

/// An RFC 6750 §3 refusal: status, OAuth error and the `WWW-Authenticate` challenge.
enum BearerFailure: Error, Equatable {
    case missing
    case invalidRequest(String)
    case invalidToken(String)
    case insufficientScope(String)
    case unavailable

    var status: HTTPResponse.Status {
        switch self {
        case .missing, .invalidToken: .unauthorized
        case .invalidRequest: .badRequest
        case .insufficientScope: .forbidden
        case .unavailable: .serviceUnavailable
        }
    }

    var error: String? {
        switch self {
        case .missing: nil
        case .invalidRequest: "invalid_request"
        case .invalidToken: "invalid_token"
        case .insufficientScope: "insufficient_scope"
        case .unavailable: "temporarily_unavailable"
        }
    }

    var detail: String {
        switch self {
        case .missing: "a Bearer access token is required"
        case .invalidRequest(let text), .invalidToken(let text), .insufficientScope(let text): text
        case .unavailable: "Relais cannot reach its store right now; retry shortly"
        }
    }

    var challenge: String {
        guard let error, self != .unavailable else { return #"Bearer realm="relais""# }
        return #"Bearer realm="relais", error="\#(error)", error_description="\#(String(detail.map { $0 == "\"" ? "'" : $0 }))""#
    }

    func response(requestID: String) -> Response {
        var headers = HTTPFields()
        headers[.wwwAuthenticate] = challenge
        return Relay.oauthError(status, error ?? "invalid_token", detail, requestID: requestID, headers: headers)
    }
}
