/// Why a platform's proof was refused: one stable code per verification step, so an app team can
/// tell a wrong bundle id from a replayed challenge, and a sentence for the log and the operator.
public struct AttestationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Code
    /// What exactly was wrong, for the app developer; never holds key material or tokens.
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.rawValue): \(reason)" }

    public enum Code: String, CaseIterable, Sendable {
        // The protocol around the platform proofs (Relais' attestation endpoints).
        case challenge = "attestation_challenge"
        case keyMismatch = "attestation_key_mismatch"
        case appleUnknownKey = "apple_assertion_unknown_key"
        // Apple App Attest: attestation (Apple's validation steps, in order).
        case appleMalformed = "apple_attestation_malformed"
        case appleChain = "apple_attestation_chain"
        case appleNonce = "apple_attestation_nonce"
        case appleKeyID = "apple_attestation_key_id"
        case appleAppID = "apple_attestation_app_id"
        case appleCounter = "apple_attestation_counter"
        case appleEnvironment = "apple_attestation_environment"
        case appleCredentialID = "apple_attestation_credential_id"
        // Apple App Attest: assertion.
        case appleAssertionMalformed = "apple_assertion_malformed"
        case appleAssertionSignature = "apple_assertion_signature"
        case appleAssertionAppID = "apple_assertion_app_id"
        case appleAssertionCounter = "apple_assertion_counter"
        // Google Play Integrity.
        case playMalformed = "play_integrity_malformed"
        case playDecryption = "play_integrity_decryption"
        case playSignature = "play_integrity_signature"
        case playDecodeService = "play_integrity_decode_service"
        case playPackage = "play_integrity_package"
        case playNonce = "play_integrity_nonce"
        case playStale = "play_integrity_stale"
        case playAppUnrecognized = "play_integrity_app_unrecognized"
        case playCertificate = "play_integrity_certificate"
        case playDevice = "play_integrity_device"

        /// The check each code stands for, for docs/errors.md.
        public var check: String {
            switch self {
            case .challenge: "The challenge is unknown, expired (5 minutes), already used, or was issued to another app: get a new one from `POST /attest/challenge`."
            case .keyMismatch:
                "The `jkt` in the client data (or the hash in the verdict) is not the RFC 7638 thumbprint of the `jwk` sent: the proof was made for another instance key."
            case .appleUnknownKey: "No attested App Attest key is stored for this `key_id` and app: attest the key first (`POST /attest/apple`)."
            case .appleMalformed:
                "The attestation object is not the CBOR map Apple sends (`fmt` `apple-appattest`, `attStmt.x5c`, `authData`), or its authenticator data is truncated."
            case .appleChain: "The `x5c` certificates do not chain to Apple's App Attestation Root CA (pinned in Relais) at the time of the check, or one of them is expired."
            case .appleNonce:
                "The leaf certificate's nonce extension (1.2.840.113635.100.8.2) is missing or differs from SHA-256(authData ‖ clientDataHash): the client data is not the one attested."
            case .appleKeyID: "The SHA-256 of the leaf certificate's public key is not the `key_id` the app sent."
            case .appleAppID: "The RP ID hash is not SHA-256 of the configured `TEAMID.bundle.id`: another app made this attestation."
            case .appleCounter: "The sign counter of a new attestation is not 0."
            case .appleEnvironment: "The aaguid names the other App Attest environment (`appattestdevelop` against `appattest`) than the one configured."
            case .appleCredentialID: "The credential id in the authenticator data is not the `key_id`."
            case .appleAssertionMalformed: "The assertion is not the CBOR map `{signature, authenticatorData}` or its authenticator data is truncated."
            case .appleAssertionSignature:
                "The assertion's signature does not verify with the key attested for this `key_id` over SHA-256(authenticatorData ‖ SHA-256(client_data))."
            case .appleAssertionAppID: "The assertion's RP ID hash is not SHA-256 of the configured app id."
            case .appleAssertionCounter: "The assertion's counter is not greater than the last one seen for this key: a replayed or cloned assertion."
            case .playMalformed: "The integrity token is not a compact JWE holding a JWS, or its payload lacks `requestDetails`, `appIntegrity` or `deviceIntegrity`."
            case .playDecryption: "The token does not decrypt (A256KW, A256GCM) with the decryption key configured from the Play Console."
            case .playSignature: "The decrypted verdict is not signed (ES256) by the verification key configured from the Play Console."
            case .playDecodeService: "Google's decodeIntegrityToken service (standard requests) could not be reached or refused the token."
            case .playPackage: "`requestDetails.requestPackageName` or `appIntegrity.packageName` is not the configured package."
            case .playNonce: "`requestDetails.nonce` (classic) or `requestHash` (standard) is not the hash of the challenge and the app-instance key thumbprint."
            case .playStale: "`requestDetails.timestampMillis` is older than the allowed age (or in the future)."
            case .playAppUnrecognized: "`appIntegrity.appRecognitionVerdict` is not `PLAY_RECOGNIZED`: the app was not installed from Play or was modified."
            case .playCertificate: "None of `appIntegrity.certificateSha256Digest` is among the configured signing certificate digests."
            case .playDevice: "`deviceIntegrity.deviceRecognitionVerdict` does not meet the configured level (basic, device or strong)."
            }
        }
    }
}
