import FoundationEssentials
import Hummingbird
import Logging
import RelaisConfig
import RelaisJOSE
import RelaisServer
import RelaisStore

/// Verifies a Relais access token presented as `Authorization: Bearer` (RFC 6750): signature with
/// Relais' keys, `typ: at+jwt`, issuer, expiry, and optionally that its session is still live.
struct AccessTokenCheck: Sendable {
    let relay: Relay

    struct Verified: Sendable {
        var subject: String
        var clientID: String
        var sid: String
        var scopes: [String]
        var acr: String?
        var claims: VerifiedClaims
        var session: SessionRecord?
    }

    func verify(_ request: Request, checkSession: Bool) async -> Result<Verified, BearerFailure> {
        guard let header = request.headers[.authorization] else { return .failure(.missing) }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return .failure(.invalidRequest("use the Bearer scheme")) }
        let token = parts[1].trimmingCharacters(in: " ")
        let claims: VerifiedClaims
        do {
            let jws = try JWS.parse(token)
            try jws.verify(with: relay.keys.signingKeys)
            var policy = ClaimsPolicy(issuer: relay.issuer)
            policy.expectedType = "at+jwt"
            policy.leeway = .seconds(5)
            policy.requiredClaims = ["sub", "client_id", "sid", "scope"]
            claims = try policy.validate(jws)
        } catch {
            return .failure(.invalidToken(error.code == "jwt_exp" ? "the access token has expired" : "the access token is not valid (\(error.code))"))
        }
        guard let subject = claims.subject, let clientID = claims.string("client_id"), let sid = claims.string("sid") else {
            return .failure(.invalidToken("the access token lacks sub, client_id or sid"))
        }
        var verified = Verified(
            subject: subject, clientID: clientID, sid: sid, scopes: (claims.string("scope") ?? "").split(separator: " ").map(String.init),
            acr: claims.acr, claims: claims, session: nil
        )
        if checkSession {
            do {
                guard let session = try await relay.sessions.get(sid), session.subject == subject, session.clientID == clientID else {
                    return .failure(.invalidToken("the session has ended"))
                }
                verified.session = session
            } catch {
                return .failure(.unavailable)
            }
        }
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
