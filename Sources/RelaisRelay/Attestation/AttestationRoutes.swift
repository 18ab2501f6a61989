import Hummingbird
import Logging
import RelaisAttest
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// The client-attester endpoints: `POST /attest/challenge` gives a one-time challenge, then each
/// ``PlatformAttester`` checks a platform proof bound to it and to the app-instance key (`jwk`) at
/// `POST /attest/{path}`, answered with a Client Attestation JWT for `/token`. The requests, field
/// by field, are in docs/client-protocol.md §2 and docs/openapi.yaml.
struct AttestationRoutes: RelayRoutes {
    let apps: [String: AppSettings]
    let attesters: [any PlatformAttester]
    let limiter: RateLimiter
    let sessions: RelayStore
    let attestations: ClientAttestationIssuer
    let events: SecurityEventLog

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let json = router.surface(.json, limitedBy: limiter)
        json.post("/attest/challenge") { request, context in
            let app = try await attestingApp(request, context).app
            let challenge = SecureRandom.token(bits: 256)
            try await sessions.saveChallenge(challenge, clientID: app.clientID)
            return RelayResponse.json(
                .ok, .object(["attestation_challenge": .string(challenge), "expires_in": .number(Double(RelayStore.challengeLifetime.components.seconds))])
            )
        }
        for attester in attesters {
            json.post(RouterPath("/attest/" + attester.path)) { request, context in try await attest(request, context, attester) }
        }
    }

    /// Reads the form and the app; the app must use attestation.
    private func attestingApp(_ request: Request, _ context: RelaisRequestContext) async throws -> ClientForm {
        let client = try await ClientForm.read(request, context, apps: apps, limiter: limiter)
        guard client.app.attestation != .off else {
            throw RelayError(.invalidClient, "this app does not use attestation (apps.\(client.app.clientID).attestation is off)")
        }
        return client
    }

    /// The common part: the instance key, the platform check, the Client Attestation JWT.
    private func attest(_ request: Request, _ context: RelaisRequestContext, _ attester: any PlatformAttester) async throws -> Response {
        let client = try await attestingApp(request, context)
        let (form, app) = (client.form, client.app)
        let platform = attester.platform
        guard let text = form["jwk"], let key = try? JWK(json: Array(text.utf8)) else {
            throw RelayError.invalidRequest("jwk (the instance's public key, JSON) is missing or unreadable")
        }
        guard !key.isPrivate, key.keyType != .oct, ClientAttestationGuard.algorithms.contains(where: { (try? key.check(for: $0)) != nil }) else {
            throw RelayError.invalidRequest("jwk must be a public EC, RSA or Ed25519 key")
        }
        do {
            try await attester.verify(form, app: app, key: key)
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
