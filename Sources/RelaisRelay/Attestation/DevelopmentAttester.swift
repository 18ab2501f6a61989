import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// `POST /attest/dev`, development only: no platform proof, a software key stands in for the
/// device's, so the demo and tests walk the attested path.
struct DevelopmentAttester: PlatformAttester {
    let challenges: AttestationChallenges
    var path: String { "dev" }
    var platform: String { "dev" }

    func verify(_ form: FormParameters, app: AppSettings, key: JWK) async throws {
        try await challenges.consume(form["challenge"], app: app)
    }
}
