import RelaisAttest
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// One platform's proof that an app instance is genuine, at `POST /attest/{path}`. The route has
/// read the form, found the app (one that uses attestation) and the instance key `jwk`; the
/// attester checks the proof, bound to a challenge and to that key. Once it passes, Relais issues a
/// Client Attestation JWT naming `platform`. A new format is one type conforming to this and one
/// entry in `Relay`'s attester list (docs/extending.md).
protocol PlatformAttester: Sendable {
    /// The route: `POST /attest/{path}`.
    var path: String { get }
    /// The Client Attestation JWT's `platform`, also in metrics, security events and the
    /// forward-auth header.
    var platform: String { get }

    /// Throws ``AttestationError`` for a proof that fails a check (`attestation_refused`), a
    /// ``RelayError`` for a request that is not one.
    func verify(_ form: FormParameters, app: AppSettings, key: JWK) async throws
}

/// The one-time challenges of `POST /attest/challenge`, as the attesters consume them.
struct AttestationChallenges: Sendable {
    let sessions: RelayStore

    func consume(_ challenge: String?, app: AppSettings) async throws {
        guard let challenge, !challenge.isEmpty, challenge.utf8.count <= 256 else { throw RelayError.invalidRequest("challenge is missing") }
        guard try await sessions.takeChallenge(challenge, clientID: app.clientID) else {
            throw AttestationError(.challenge, "the challenge is unknown, expired, used or for another app")
        }
    }
}
