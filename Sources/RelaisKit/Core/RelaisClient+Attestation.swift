import Crypto
import Foundation

extension RelaisClient {
    /// `OAuth-Client-Attestation` and its PoP (draft-ietf-oauth-attestation-based-client-auth),
    /// attesting the instance first when no unexpired Client Attestation JWT is held.
    func attestationHeaders(key: any ProofKey) async throws -> [(name: String, value: String)] {
        let jwt = try await clientAttestation(key: key)
        return [(name: "OAuth-Client-Attestation", value: jwt), (name: "OAuth-Client-Attestation-PoP", value: try attestationPoP(key: key))]
    }

    /// The proof of possession of the instance key that goes with the Client Attestation JWT.
    func attestationPoP(key: any ProofKey) throws -> String {
        try CompactJWT.sign(
            header: [("alg", .string("ES256")), ("typ", .string("oauth-client-attestation-pop+jwt"))],
            claims: [
                ("iss", .string(configuration.clientID)), ("aud", .string(configuration.issuer)), ("jti", .string(CompactJWT.random(bits: 128))),
                ("iat", .integer(Int(relayNow.timeIntervalSince1970))),
            ],
            key: key
        )
    }

    /// What App Attest signs over (hashed): the challenge and the instance key's thumbprint.
    static func appAttestClientData(challenge: String, jkt: String) -> Data {
        Data(JSONReading.serialize([("challenge", .string(challenge)), ("jkt", .string(jkt))]).utf8)
    }

    func forgetAttestation() throws {
        attestation = nil
        try platform.storage.delete(keys.attestation)
    }

    /// The Client Attestation JWT: the stored one while it has more than a minute left, else a
    /// new one from Relais' client attester.
    func clientAttestation(key: any ProofKey) async throws -> String {
        if let attestation, attestation.thumbprint == key.thumbprint, attestation.expiresAt > now.addingTimeInterval(60) { return attestation.jwt }
        guard let mode = configuration.attestation else { throw RelaisKitError(.invalidArgument, "attestation is off in the configuration") }
        let answer: [String: KitJSON]
        switch mode {
        case .development:
            let challenge = try await attestationChallenge()
            answer = try await attestPost("/attest/dev", [("client_id", configuration.clientID), ("challenge", challenge), ("jwk", key.publicJWK)])
        case .appAttest(let service):
            answer = try await appAttest(service, key: key)
        }
        guard let jwt = answer.string("client_attestation") else { throw RelaisKitError(.invalidResponse, "the attester gave no client_attestation") }
        let stored = StoredAttestation(jwt: jwt, expiresAt: now.addingTimeInterval(TimeInterval(answer.int("expires_in") ?? 300)), thumbprint: key.thumbprint)
        attestation = stored
        try platform.storage.encode(stored, keys.attestation)
        return jwt
    }

    /// App Attest: `attestKey` and `/attest/apple` once per installation, `generateAssertion` and
    /// `/attest/apple/assertion` afterwards; a new App Attest key once when the old one is invalid.
    private func appAttest(_ service: any AppAttestService, key: any ProofKey) async throws -> [String: KitJSON] {
        guard service.isSupported else { throw RelaisKitError(.attestationRefused, "App Attest is not supported on this device") }
        var renewed = false
        while true {
            let challenge = try await attestationChallenge()
            let clientData = Self.appAttestClientData(challenge: challenge, jkt: key.thumbprint)
            let hash = Data(SHA256.hash(data: clientData))
            var fields = [("client_id", configuration.clientID), ("client_data", Base64URL.encode(clientData)), ("jwk", key.publicJWK)]
            do {
                if let keyID = try platform.storage.read(keys.appAttestKeyID).map({ String(decoding: $0, as: UTF8.self) }) {
                    let assertion = try await service.generateAssertion(keyID, clientDataHash: hash)
                    fields += [("key_id", keyID), ("assertion", assertion.base64EncodedString())]
                    return try await attestPost("/attest/apple/assertion", fields)
                }
                let keyID = try await service.generateKey()
                let object = try await service.attestKey(keyID, clientDataHash: hash)
                fields += [("key_id", keyID), ("attestation", object.base64EncodedString())]
                let answer = try await attestPost("/attest/apple", fields)
                try platform.storage.write(keys.appAttestKeyID, Data(keyID.utf8))
                return answer
            } catch let error as RelaisKitError where !renewed && (error.code == .appAttestInvalidKey || error.message.hasPrefix("apple_assertion_unknown_key")) {
                renewed = true
                try platform.storage.delete(keys.appAttestKeyID)
            }
        }
    }

    private func attestationChallenge() async throws -> String {
        let endpoints = try await endpoints()
        let answer = try await attestPost(endpoints.challenge ?? endpoints.path("/attest/challenge"), [("client_id", configuration.clientID)])
        guard let challenge = answer.string("attestation_challenge") else { throw RelaisKitError(.invalidResponse, "no attestation_challenge") }
        return challenge
    }

    private func attestPost(_ path: String, _ fields: [(String, String)]) async throws -> [String: KitJSON] {
        try await attestPost(try await endpoints().path(path), fields)
    }

    private func attestPost(_ url: URL, _ fields: [(String, String)]) async throws -> [String: KitJSON] {
        let path = url.path
        let response = try await platform.transport.send(.form(url, fields))
        if response.status == 200, let answer = JSONReading.object(response.body) { return answer }
        guard let failure = RelayFailure(response) else { throw RelaisKitError(.invalidResponse, "\(path) answered \(response.status)") }
        if failure.error == "attestation_refused" { throw RelaisKitError(.attestationRefused, failure.description, status: response.status) }
        throw failure.kitError(status: response.status)
    }
}
