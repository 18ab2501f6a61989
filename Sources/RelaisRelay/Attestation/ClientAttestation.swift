import HTTPTypes
import Hummingbird
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// How an app instance proved itself: the platform's proof Relais checked (or the attester that
/// did), and the instance key its PoPs are signed with.
struct ClientAttested: Sendable, Equatable {
    /// The ``PlatformAttester``'s platform (`ios`, `android`, `dev`), or `external` for an attester
    /// of the app team's own.
    var platform: String
    /// RFC 7638 thumbprint of the instance key (`cnf.jwk`).
    var thumbprint: String
}

/// Relais as the client attester (draft-ietf-oauth-attestation-based-client-auth §5.1): once a
/// platform proof passes, the app gets a short-lived Client Attestation JWT naming its instance
/// key; it then authenticates at `/token` with that JWT and a PoP signed by the key.
struct ClientAttestationIssuer: Sendable {
    static let type = "oauth-client-attestation+jwt"

    let issuer: String
    let keys: RelayKeys
    let clock: any RelaisClock

    func issue(app: AppSettings, instanceKey: JWK, platform: String) throws -> JSONValue {
        let ring = keys.ring
        let now = clock.now.rounded(.down)
        let lifetime = Double(app.clientAttestationLifetime.components.seconds)
        guard let publicKey = instanceKey.publicJSON() else { throw RelayError.invalidRequest("jwk must be a public key") }
        let claims: JSONValue = .object([
            "iss": .string(issuer), "sub": .string(app.clientID), "iat": .number(now), "exp": .number(now + lifetime),
            "cnf": .object(["jwk": .object(publicKey)]), "platform": .string(platform),
        ])
        let jwt = try JWS.sign(payload: claims.serialized(), with: ring.activeSigningKey, algorithm: ring.activeAlgorithm, extraHeader: ["typ": .string(Self.type)])
        return .object([
            "client_attestation": .string(jwt), "token_type": .string(Self.type), "expires_in": .number(lifetime), "platform": .string(platform),
        ])
    }
}

/// Relais as the authorization server: the `OAuth-Client-Attestation` and
/// `OAuth-Client-Attestation-PoP` headers at `/token`, checked per the app's `attestation` policy.
struct ClientAttestationGuard: Sendable {
    static let attestationHeader = HTTPField.Name("OAuth-Client-Attestation")!
    static let proofHeader = HTTPField.Name("OAuth-Client-Attestation-PoP")!
    static let proofType = "oauth-client-attestation-pop+jwt"
    /// How old a PoP may be, as for DPoP proofs.
    static let proofWindow: Duration = .seconds(60)
    static let leeway: Duration = .seconds(5)
    static let algorithms: [JWSAlgorithm] = [.es256, .es384, .edDSA, .rs256, .ps256]

    let issuer: String
    let keys: RelayKeys
    let sessions: RelayStore
    let events: SecurityEventLog

    /// nil when the policy is `off`, or `allowed` and no attestation was sent.
    func check(_ request: Request, app: AppSettings) async throws -> ClientAttested? {
        do {
            return try await verified(request, app: app)
        } catch let error as RelayError where error.code == .invalidClientAttestation {
            events.record(.attestationRefused, reason: error.code.rawValue, client: app.clientID, [("platform", "client_attestation")])
            throw error
        }
    }

    private func verified(_ request: Request, app: AppSettings) async throws -> ClientAttested? {
        guard app.attestation != .off else { return nil }
        let attestations = request.headers[values: Self.attestationHeader], proofs = request.headers[values: Self.proofHeader]
        if attestations.isEmpty && proofs.isEmpty {
            guard app.attestation != .required else {
                throw RelayError(.invalidClientAttestation, "this app must authenticate with OAuth-Client-Attestation and OAuth-Client-Attestation-PoP (attestation: required)")
            }
            return nil
        }
        guard attestations.count == 1, proofs.count == 1 else {
            throw RelayError(.invalidClientAttestation, "send exactly one OAuth-Client-Attestation and one OAuth-Client-Attestation-PoP header")
        }
        let (instanceKey, platform) = try verifyAttestation(attestations[0], app: app)
        try await verifyProof(proofs[0], key: instanceKey, app: app)
        return ClientAttested(platform: platform, thumbprint: instanceKey.thumbprint())
    }

    private func verifyAttestation(_ token: String, app: AppSettings) throws -> (JWK, String) {
        let invalid = { (why: String) in RelayError(.invalidClientAttestation, "the client attestation " + why) }
        guard let jws = try? JWS.parse(token) else { throw invalid("is not a compact JWS") }
        guard let unverified = JSONValue.object(from: jws.payload), let attester = unverified["iss"]?.stringValue else { throw invalid("has no iss") }
        do {
            if attester == issuer {
                try jws.verify(with: keys.ring.signingKeys)
            } else if let external = app.attester, external.issuer == attester {
                guard Self.algorithms.contains(jws.algorithm) else { throw invalid("uses \(jws.algorithm.rawValue), not an asymmetric algorithm") }
                _ = try jws.verify(with: external.keys)
            } else {
                throw invalid("is from '\(attester)', not an attester this app trusts")
            }
        } catch let error as RelayError {
            throw error
        } catch {
            throw invalid("signature does not verify")
        }
        var policy = ClaimsPolicy(issuer: attester, now: { [clock = sessions.clock] in clock.now })
        policy.expectedType = ClientAttestationIssuer.type
        policy.leeway = Self.leeway
        policy.requiredClaims = ["sub", "cnf"]
        let claims: VerifiedClaims
        do {
            claims = try policy.validate(jws)
        } catch {
            if error.failedCheck == .expiration { throw RelayError(.useFreshAttestation, "the client attestation has expired: attest the app again") }
            throw invalid("is not valid (\(error.code))")
        }
        guard claims.subject == app.clientID else { throw invalid("was issued to another client (sub)") }
        guard let jwk = claims["cnf"]?.objectValue?["jwk"]?.objectValue, let key = try? JWK(object: jwk), !key.isPrivate, key.keyType != .oct else {
            throw invalid("has no public cnf.jwk")
        }
        return (key, attester == issuer ? claims.string("platform") ?? "external" : "external")
    }

    private func verifyProof(_ token: String, key: JWK, app: AppSettings) async throws {
        let invalid = { (why: String) in RelayError(.invalidClientAttestation, "the attestation PoP " + why) }
        guard let jws = try? JWS.parse(token) else { throw invalid("is not a compact JWS") }
        guard Self.algorithms.contains(jws.algorithm), (try? key.check(for: jws.algorithm)) != nil, (try? jws.verify(with: key)) != nil else {
            throw invalid("is not signed by the attested instance key (cnf.jwk)")
        }
        var policy = ClaimsPolicy(audience: issuer, now: { [clock = sessions.clock] in clock.now })
        policy.checkAuthorizedParty = false
        policy.expectedType = Self.proofType
        policy.requireExpiration = false
        policy.requireIssuedAt = true
        policy.maxAge = Self.proofWindow
        policy.leeway = Self.leeway
        policy.requiredClaims = ["jti"]
        let claims: VerifiedClaims
        do { claims = try policy.validate(jws) } catch { throw invalid("is not valid (\(error.code)): aud must be \(issuer), iat recent, jti set") }
        if let subject = claims.issuer, subject != app.clientID { throw invalid("names another client (iss)") }
        guard let jti = claims.string("jti"), !jti.isEmpty, jti.utf8.count <= 256 else { throw invalid("has no usable jti") }
        if let challenge = claims.string("challenge") {
            guard try await sessions.takeChallenge(challenge, clientID: app.clientID) else {
                throw invalid("carries a challenge that is unknown, expired, used or for another app")
            }
        }
        guard try await sessions.rememberAttestationProof(thumbprint: key.thumbprint(), tokenID: jti, for: Self.proofWindow + Self.leeway * 2) else {
            throw invalid("was already used (jti)")
        }
    }
}
