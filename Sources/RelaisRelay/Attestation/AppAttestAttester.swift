import FoundationEssentials
import RelaisAttest
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE

/// Apple App Attest (`apps.<id>.apple`): `POST /attest/apple` attests a new key once per install,
/// `POST /attest/apple/assertion` re-attests with it later, its signature counter rising each time.
struct AppAttestAttester: PlatformAttester {
    enum Step: Sendable {
        case attestation, assertion
    }

    let step: Step
    let challenges: AttestationChallenges

    var path: String { step == .attestation ? "apple" : "apple/assertion" }
    var platform: String { "ios" }
    private var sessions: RelayStore { challenges.sessions }

    func verify(_ form: FormParameters, app: AppSettings, key: JWK) async throws {
        guard let verifier = app.apple?.verifier else { throw RelayError.invalidRequest("this app has no App Attest settings (apps.\(app.clientID).apple)") }
        guard let keyID = form["key_id"], let keyBytes = Self.bytes(keyID), keyBytes.count == 32 else {
            throw RelayError.invalidRequest("key_id must be the base64 App Attest key id")
        }
        switch step {
        case .attestation: try await attest(form, app: app, key: key, verifier: verifier, keyID: keyBytes)
        case .assertion: try await reattest(form, app: app, key: key, verifier: verifier, keyID: keyBytes)
        }
    }

    private func attest(_ form: FormParameters, app: AppSettings, key: JWK, verifier: AppAttestVerifier, keyID: [UInt8]) async throws {
        guard let object = form["attestation"].flatMap(Self.bytes) else { throw RelayError.invalidRequest("attestation must be the base64 attestation object") }
        let data = try await clientData(form, app: app, key: key)
        let attested = try await verifier.verifyAttestation(
            object, keyID: keyID, clientDataHash: RelaisCrypto.SHA256.hash(data), at: Date(timeIntervalSince1970: sessions.clock.now)
        )
        let record = AppAttestKeyRecord(publicKey: Base64URL.encode(attested.publicKey), counter: attested.counter)
        try await sessions.saveAppAttestKey(record, clientID: app.clientID, keyID: Base64URL.encode(keyID))
    }

    private func reattest(_ form: FormParameters, app: AppSettings, key: JWK, verifier: AppAttestVerifier, keyID: [UInt8]) async throws {
        guard let assertion = form["assertion"].flatMap(Self.bytes) else { throw RelayError.invalidRequest("assertion must be the base64 assertion") }
        let storedID = Base64URL.encode(keyID)
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

    /// `client_data`: what the app hashed for App Attest; it names the challenge and the instance key.
    private func clientData(_ form: FormParameters, app: AppSettings, key: JWK) async throws -> [UInt8] {
        guard let encoded = form["client_data"], let bytes = Self.bytes(encoded), let json = JSONValue.object(from: bytes) else {
            throw RelayError.invalidRequest("client_data must be base64url of a JSON object {challenge, jkt}")
        }
        guard json["jkt"]?.stringValue == key.thumbprint() else { throw AttestationError(.keyMismatch, "client_data.jkt is not the thumbprint of jwk") }
        try await challenges.consume(json["challenge"]?.stringValue, app: app)
        return bytes
    }

    /// Base64 as iOS gives it (standard, with padding) or base64url.
    static func bytes(_ text: String) -> [UInt8]? {
        Base64.decode(text) ?? Base64URL.decode(text.filter { $0 != "=" })
    }
}
