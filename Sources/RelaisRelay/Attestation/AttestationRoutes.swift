import FoundationEssentials
import Hummingbird
import Logging
import RelaisAttest
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// The client-attester endpoints: a one-time challenge, then a platform proof bound to it and to
/// the app-instance key, answered with a Client Attestation JWT for `/token`.
///
/// - `POST /attest/challenge` (`client_id`)
/// - `POST /attest/apple` (`client_id`, `key_id`, `attestation`, `client_data`, `jwk`): App Attest, once per install
/// - `POST /attest/apple/assertion` (`client_id`, `key_id`, `assertion`, `client_data`, `jwk`): later re-attestation
/// - `POST /attest/android` (`client_id`, `integrity_token`, `challenge`, `jwk`, `request_type`): Play Integrity
/// - `POST /attest/dev` (`client_id`, `challenge`, `jwk`): development only
///
/// `client_data` is base64url of the JSON `{"challenge": …, "jkt": …}` the app passed (hashed) to
/// App Attest; `jkt` is the thumbprint of `jwk`, the key that will sign PoPs and DPoP proofs.
struct AttestationRoutes: RelayRoutes {
    let apps: [String: AppSettings]
    let platforms: [String: PlatformAttesters]
    let limiter: RateLimiter
    let sessions: SessionStore
    let attestations: ClientAttestationIssuer
    let devAttester: Bool
    let events: SecurityEventLog

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.post("/attest/challenge") { request, context in
            try await limiter.guarding(.json, request, context) {
                let (_, app) = try await form(request, context)
                let challenge = SecureRandom.token(bits: 256)
                try await sessions.saveChallenge(challenge, clientID: app.clientID)
                return RelayResponse.json(
                    .ok, .object(["attestation_challenge": .string(challenge), "expires_in": .number(Double(SessionStore.challengeLifetime.components.seconds))])
                )
            }
        }
        router.post("/attest/apple") { request, context in
            try await attest(request, context, platform: "ios") { form, app, key in try await apple(form, app: app, key: key) }
        }
        router.post("/attest/apple/assertion") { request, context in
            try await attest(request, context, platform: "ios") { form, app, key in try await appleAssertion(form, app: app, key: key) }
        }
        router.post("/attest/android") { request, context in
            try await attest(request, context, platform: "android") { form, app, key in try await android(form, app: app, key: key) }
        }
        if devAttester {
            router.post("/attest/dev") { request, context in
                try await attest(request, context, platform: "dev") { form, app, key in
                    try await consume(form["challenge"], app: app)
                }
            }
        }
    }

    /// Reads the form and the app; the app must use attestation.
    private func form(_ request: Request, _ context: RelaisRequestContext) async throws -> (FormParameters, AppSettings) {
        guard let form = try await FormParameters.body(of: request, limit: 64 * 1024) else {
            throw RelayError.invalidRequest("the body must be an application/x-www-form-urlencoded form of at most \(FormParameters.maxFields) fields")
        }
        if let repeated = form.firstRepeatedName { throw RelayError.invalidRequest("the parameter '\(repeated)' is given more than once") }
        guard let clientID = form["client_id"], !clientID.isEmpty else { throw RelayError.invalidRequest("client_id is missing") }
        guard let app = apps[clientID] else { throw RelayError(.invalidClient, "no app is registered with this client_id") }
        if let limited = await limiter.check(clientID: clientID, logger: context.logger) { throw limited }
        guard app.attestation != .off else { throw RelayError(.invalidClient, "this app does not use attestation (apps.\(clientID).attestation is off)") }
        return (form, app)
    }

    /// The common part: the instance key, the platform check, the Client Attestation JWT.
    private func attest(
        _ request: Request, _ context: RelaisRequestContext, platform: String,
        _ verify: @Sendable (FormParameters, AppSettings, JWK) async throws -> Void
    ) async throws -> Response {
        try await limiter.guarding(.json, request, context) {
            let (form, app) = try await form(request, context)
            guard let text = form["jwk"], let key = try? JWK(json: Array(text.utf8)) else { throw RelayError.invalidRequest("jwk (the instance's public key, JSON) is missing or unreadable") }
            guard !key.isPrivate, key.keyType != .oct, ClientAttestationGuard.algorithms.contains(where: { (try? key.check(for: $0)) != nil }) else {
                throw RelayError.invalidRequest("jwk must be a public EC, RSA or Ed25519 key")
            }
            do {
                try await verify(form, app, key)
            } catch let error as AttestationError {
                context.logger.warning("attestation refused", metadata: ["client_id": "\(LogText.escaped(app.clientID))", "platform": "\(platform)", "code": "\(error.code.rawValue)"])
                RelayMetrics.attestation(platform: platform, outcome: error.code.rawValue)
                events.record(.attestationRefused, reason: error.code.rawValue, client: app.clientID, [("platform", platform)])
                throw RelayError(.attestationRefused, error.description)
            }
            RelayMetrics.attestation(platform: platform, outcome: "ok")
            events.record(.attestationSucceeded, client: app.clientID, [("platform", platform)])
            context.logger.info("app attested", metadata: ["client_id": "\(LogText.escaped(app.clientID))", "platform": "\(platform)"])
            return RelayResponse.json(.ok, try attestations.issue(app: app, instanceKey: key, platform: platform))
        }
    }

    private func consume(_ challenge: String?, app: AppSettings) async throws {
        guard let challenge, !challenge.isEmpty, challenge.utf8.count <= 256 else { throw RelayError.invalidRequest("challenge is missing") }
        guard try await sessions.takeChallenge(challenge, clientID: app.clientID) else {
            throw AttestationError(.challenge, "the challenge is unknown, expired, used or for another app")
        }
    }

    /// `client_data`: what the app hashed for App Attest; it names the challenge and the instance key.
    private func clientData(_ form: FormParameters, app: AppSettings, key: JWK) async throws -> [UInt8] {
        guard let encoded = form["client_data"], let bytes = Self.bytes(encoded), let json = JSONValue.object(from: bytes) else {
            throw RelayError.invalidRequest("client_data must be base64url of a JSON object {challenge, jkt}")
        }
        guard json["jkt"]?.stringValue == key.thumbprint() else { throw AttestationError(.keyMismatch, "client_data.jkt is not the thumbprint of jwk") }
        try await consume(json["challenge"]?.stringValue, app: app)
        return bytes
    }

    private func apple(_ form: FormParameters, app: AppSettings, key: JWK) async throws {
        guard let verifier = platforms[app.clientID]?.apple else { throw RelayError.invalidRequest("this app has no App Attest settings (apps.\(app.clientID).apple)") }
        guard let keyID = form["key_id"], let keyBytes = Self.bytes(keyID), keyBytes.count == 32 else { throw RelayError.invalidRequest("key_id must be the base64 App Attest key id") }
        guard let object = form["attestation"].flatMap(Self.bytes) else { throw RelayError.invalidRequest("attestation must be the base64 attestation object") }
        let data = try await clientData(form, app: app, key: key)
        let attested = try await verifier.verifyAttestation(
            object, keyID: keyBytes, clientDataHash: RelaisCrypto.SHA256.hash(data), at: Date(timeIntervalSince1970: sessions.clock.now)
        )
        let record = AppAttestKeyRecord(publicKey: Base64URL.encode(attested.publicKey), counter: attested.counter)
        try await sessions.saveAppAttestKey(record, clientID: app.clientID, keyID: Base64URL.encode(keyBytes))
    }

    private func appleAssertion(_ form: FormParameters, app: AppSettings, key: JWK) async throws {
        guard let verifier = platforms[app.clientID]?.apple else { throw RelayError.invalidRequest("this app has no App Attest settings (apps.\(app.clientID).apple)") }
        guard let keyID = form["key_id"], let keyBytes = Self.bytes(keyID), keyBytes.count == 32 else { throw RelayError.invalidRequest("key_id must be the base64 App Attest key id") }
        guard let assertion = form["assertion"].flatMap(Self.bytes) else { throw RelayError.invalidRequest("assertion must be the base64 assertion") }
        let storedID = Base64URL.encode(keyBytes)
        guard let stored = try await sessions.appAttestKey(clientID: app.clientID, keyID: storedID), let publicKey = Base64URL.decode(stored.publicKey) else {
            throw AttestationError(.appleUnknownKey, "no attested key with this key_id for \(app.clientID)")
        }
        let data = try await clientData(form, app: app, key: key)
        let counter = try verifier.verifyAssertion(assertion, clientData: data, publicKey: publicKey, previousCounter: stored.counter)
        var advanced = stored
        advanced.counter = counter
        guard try await sessions.advanceAppAttestCounter(from: stored.counter, to: advanced, clientID: app.clientID, keyID: storedID) else {
            throw AttestationError(.appleAssertionCounter, "another assertion by this key moved the counter first")
        }
    }

    private func android(_ form: FormParameters, app: AppSettings, key: JWK) async throws {
        guard let attesters = platforms[app.clientID], attesters.classic != nil || attesters.standard != nil else {
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
        try await consume(challenge, app: app)
        let expected = PlayIntegrityVerifier.requestHash(challenge: challenge ?? "", thumbprint: key.thumbprint())
        _ = try await verifier.verify(token, expectedHash: expected, now: sessions.clock.now)
    }

    /// Base64 as iOS and Android give it (standard, with padding) or base64url.
    static func bytes(_ text: String) -> [UInt8]? {
        Base64.decode(text) ?? Base64URL.decode(text.filter { $0 != "=" })
    }
}

/// The platform verifiers of one app, built once from its settings.
struct PlatformAttesters: Sendable {
    var apple: AppAttestVerifier?
    var classic: PlayIntegrityVerifier?
    var standard: PlayIntegrityVerifier?

    init(_ app: AppSettings, http: HTTPClient, now: @escaping @Sendable () -> Double) throws {
        apple = app.apple?.verifier
        guard let android = app.android else { return }
        if let decryption = android.decryptionKey, let verification = android.verificationKey {
            classic = PlayIntegrityVerifier(policy: android.policy, decoder: try PlayIntegrityLocalDecoder(decryptionKey: decryption, verificationKey: verification))
        }
        if let account = android.serviceAccount {
            let google = try PlayIntegrityGoogleDecoder(serviceAccount: account, http: http, apiBaseURL: android.decodeServiceURL, now: now)
            standard = PlayIntegrityVerifier(policy: android.policy, decoder: google)
        }
    }
}
