import RelaisAttest
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// Google Play Integrity (`apps.<id>.android`), `POST /attest/android`: a verdict whose request hash
/// is SHA-256(challenge ‖ jkt), decoded locally (classic requests) or by Google (standard ones).
struct PlayIntegrityAttester: PlatformAttester {
    /// One app's verifiers, built once from its settings.
    struct Verifiers: Sendable {
        var classic: PlayIntegrityVerifier?
        var standard: PlayIntegrityVerifier?
    }

    let verifiers: [String: Verifiers]
    let challenges: AttestationChallenges
    var path: String { "android" }
    var platform: String { "android" }

    init(apps: [String: AppSettings], challenges: AttestationChallenges, http: HTTPClient) throws {
        self.challenges = challenges
        let clock = challenges.sessions.clock
        verifiers = try apps.compactMapValues { app in
            guard app.attestation != .off, let android = app.android else { return nil }
            var found = Verifiers()
            if let decryption = android.decryptionKey, let verification = android.verificationKey {
                found.classic = PlayIntegrityVerifier(policy: android.policy, decoder: try PlayIntegrityLocalDecoder(decryptionKey: decryption, verificationKey: verification))
            }
            if let account = android.serviceAccount {
                let google = try PlayIntegrityGoogleDecoder(serviceAccount: account, http: http, apiBaseURL: android.decodeServiceURL, now: { clock.now })
                found.standard = PlayIntegrityVerifier(policy: android.policy, decoder: google)
            }
            return found
        }
    }

    func verify(_ form: FormParameters, app: AppSettings, key: JWK) async throws {
        guard let attesters = verifiers[app.clientID], attesters.classic != nil || attesters.standard != nil else {
            throw RelayError.invalidRequest("this app has no Play Integrity settings (apps.\(app.clientID).android)")
        }
        guard let token = form["integrity_token"], !token.isEmpty else { throw RelayError.invalidRequest("integrity_token is missing") }
        let verifier: PlayIntegrityVerifier
        switch form["request_type"] ?? (attesters.classic != nil ? "classic" : "standard") {
        case "classic":
            guard let classic = attesters.classic else { throw RelayError.invalidRequest("classic requests need android.decryption_key and verification_key") }
            verifier = classic
        case "standard":
            guard let standard = attesters.standard else { throw RelayError.invalidRequest("standard requests need android.service_account") }
            verifier = standard
        default:
            throw RelayError.invalidRequest("request_type must be classic or standard")
        }
        let challenge = form["challenge"]
        try await challenges.consume(challenge, app: app)
        let expected = PlayIntegrityVerifier.requestHash(challenge: challenge ?? "", thumbprint: key.thumbprint())
        _ = try await verifier.verify(token, expectedHash: expected, now: challenges.sessions.clock.now)
    }
}
