import HTTPTypes
import Hummingbird
import RelaisClock
import RelaisConfig
import RelaisJOSE

/// DPoP (RFC 9449) in the relay: the proof sent to `/token` (the tokens are then bound to its key)
/// and the proof that must come with a bound token at `/userinfo`. Every proof is used once across
/// all instances: its `jti` is remembered in the store for as long as the proof is acceptable.
struct DPoPGuard: Sendable {
    let verifier: DPoPProofVerifier
    let sessions: RelayStore
    let nonces: DPoPNonces
    let events: SecurityEventLog

    static let header = HTTPField.Name("DPoP")!
    static let nonceHeader = HTTPField.Name("DPoP-Nonce")!
    /// What `WWW-Authenticate: DPoP algs=…` and the metadata advertise.
    static let algorithms = [JWSAlgorithm.es256, .es384, .edDSA, .rs256, .ps256].map(\.rawValue).joined(separator: " ")

    init(sessions: RelayStore, nonces: DPoPNonces, events: SecurityEventLog) {
        verifier = DPoPProofVerifier(now: { [clock = sessions.clock] in clock.now })
        self.sessions = sessions
        self.nonces = nonces
        self.events = events
    }

    /// The proof sent with a token request when the app's policy takes one; nil when none was sent
    /// (and none is required) or the policy is `off`.
    func tokenRequestProof(_ request: Request, app: AppSettings, url: String) async throws -> DPoPProof? {
        guard app.dpop != .off else { return nil }
        let values = request.headers[values: Self.header]
        if values.isEmpty {
            guard app.dpop != .required else { throw refused(.invalidDPoPProof("this app must send a DPoP proof (dpop: required)"), client: app.clientID) }
            return nil
        }
        return try await check(values, method: "POST", url: url, accessToken: nil, nonces: app.dpopNonce ? nonces.accepted : [], client: app.clientID)
    }

    /// The proof that must come with a DPoP-bound access token, for this request's method and URL.
    func resourceProof(_ request: Request, accessToken: String, method: String, url: String) async throws -> DPoPProof {
        let values = request.headers[values: Self.header]
        guard !values.isEmpty else { throw refused(.invalidDPoPProof("a DPoP-bound token needs a DPoP proof")) }
        return try await check(values, method: method, url: url, accessToken: accessToken)
    }

    /// RFC 9449 §5: a token bound to a key acts only with a proof by that key; revoking it or
    /// logging out with it too, so that a leaked token alone cannot end a person's session.
    func possession(_ request: Request, thumbprint: String, url: String, client: String?) async throws {
        let values = request.headers[values: Self.header]
        guard !values.isEmpty else {
            throw refused(.invalidDPoPProof("this token is bound to a DPoP key: send a DPoP proof by that key"), client: client)
        }
        let proof = try await check(values, method: "POST", url: url, accessToken: nil, client: client)
        guard proof.thumbprint == thumbprint else {
            throw refused(.invalidDPoPProof("the DPoP proof is not by the key this token is bound to"), client: client)
        }
    }

    private func check(
        _ values: [String], method: String, url: String, accessToken: String?, nonces accepted: [String] = [], client: String? = nil
    ) async throws -> DPoPProof {
        guard values.count == 1 else { throw refused(.invalidDPoPProof("send exactly one DPoP header"), client: client) }
        let proof: DPoPProof
        do {
            proof = try verifier.verify(values[0], method: method, url: url, accessToken: accessToken, nonces: accepted)
        } catch .nonceMismatch {
            throw RelayError(.useDPoPNonce, "make the DPoP proof again with the nonce in DPoP-Nonce", headers: [Self.nonceHeader: nonces.current])
        } catch {
            throw refused(.invalidDPoPProof(error.description), client: client)
        }
        guard try await sessions.rememberProof(thumbprint: proof.thumbprint, tokenID: proof.tokenID, for: verifier.window + verifier.leeway) else {
            throw refused(.invalidDPoPProof("this proof was already used (jti)"), client: client)
        }
        return proof
    }

    /// A refused proof is a security event; a request for the server's nonce is not (it is the
    /// protocol's normal second try).
    private func refused(_ error: RelayError, client: String? = nil) -> RelayError {
        events.record(.dpopRefused, reason: error.code.rawValue, client: client)
        return error
    }
}
