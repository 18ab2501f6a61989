import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import RelaisAttest
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// docs/extending.md followed in a test: a grant and an attestation format that exist only here,
/// each one type and one registration, answered by the relay as its own.
@Suite(.tags(.fast)) struct ExtensionRecipeTests {
    typealias Route = RelayRouteTests
    typealias Attestation = RelayAttestationTests

    // MARK: A grant

    /// A throwaway grant: it answers with what it was given.
    struct EchoGrant: TokenGrant {
        static let grantType = "urn:example:params:oauth:grant-type:echo"

        func answer(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
            guard let value = form["value"], !value.isEmpty else { throw RelayError.invalidRequest("value is missing") }
            return .object(["echo": .string(value), "client_id": .string(app.clientID), "dpop": .bool(proof != nil)])
        }
    }

    @Test func aGrantRegisteredInTheRelayIsAnsweredAndListed() async throws {
        var fixture = Route.Fixture()
        fixture.extensions.grants = [EchoGrant()]
        try await fixture.test { client in
            let answered = try await Attestation.post(client, "/token", [("grant_type", EchoGrant.grantType), ("client_id", "app"), ("value", "bonjour")])
            #expect(answered.status == .ok, "\(String(buffer: answered.body))")
            #expect(Route.json(answered) == ["echo": .string("bonjour"), "client_id": .string("app"), "dpop": .bool(false)])
            // The route's preamble is the grant's too: an unknown app never reaches it; its own refusals are OAuth errors.
            let stranger = try await Attestation.post(client, "/token", [("grant_type", EchoGrant.grantType), ("client_id", "nobody"), ("value", "x")])
            #expect(Attestation.refusal(stranger).1 == "invalid_client")
            let empty = try await Attestation.post(client, "/token", [("grant_type", EchoGrant.grantType), ("client_id", "app")])
            let (status, error, description) = Attestation.refusal(empty)
            #expect(status == .badRequest && error == "invalid_request" && description == "value is missing")
            // Another grant_type names every registered grant, the new one last.
            let other = try await Attestation.post(client, "/token", [("grant_type", "password"), ("client_id", "app")])
            #expect(Attestation.refusal(other).2 == "grant_type must be authorization_code, refresh_token, urn:ietf:params:oauth:grant-type:device_code or \(EchoGrant.grantType)")
            // The metadata lists it (the device grant is not offered: no app may use it).
            let metadata = Route.json(try await client.execute(uri: "/.well-known/oauth-authorization-server", method: .get))
            #expect(metadata["grant_types_supported"] == .array(["authorization_code", "refresh_token", EchoGrant.grantType].map(JSONValue.string)))
        }
    }

    // MARK: An attestation format

    /// A throwaway format: the "device" proves itself with a passphrase, bound to the challenge.
    struct PassphraseAttester: PlatformAttester {
        let path = "passphrase", platform = "passphrase"
        let challenges: AttestationChallenges

        func verify(_ form: FormParameters, app: AppSettings, key: JWK) async throws {
            // The challenge first: a wrong passphrase still uses it up.
            try await challenges.consume(form["challenge"], app: app)
            guard form["passphrase"] == "open sesame" else { throw AttestationError(.keyMismatch, "wrong passphrase") }
        }
    }

    @Test func anAttestationFormatRegisteredInTheRelayAttestsApps() async throws {
        var registering = Attestation.fixture(.required) { $0.relay.devAttester = false }
        registering.extensions.attesters = [PassphraseAttester(challenges: AttestationChallenges(sessions: registering.sessions))]
        let fixture = registering
        try await fixture.test { client in
            let instance = try Attestation.Instance(fixture.clock)
            let wrong = try await Attestation.post(
                client, "/attest/passphrase", [("client_id", "app"), ("challenge", try await Attestation.challenge(client)), ("jwk", instance.jwk), ("passphrase", "sesame")]
            )
            let (status, error, description) = Attestation.refusal(wrong)
            #expect(status == .badRequest && error == "attestation_refused" && description == "attestation_key_mismatch: wrong passphrase")
            let response = try await Attestation.post(
                client, "/attest/passphrase", [("client_id", "app"), ("challenge", try await Attestation.challenge(client)), ("jwk", instance.jwk), ("passphrase", "open sesame")]
            )
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(Route.json(response)["platform"] == .string("passphrase"))
            let attestation = try #require(Route.json(response)["client_attestation"]?.stringValue)
            #expect(try RelayDPoPTests.claims(attestation)["platform"] == .string("passphrase"))
            // /token takes its Client Attestation JWT, and the session remembers the platform.
            let tokens = try await RelayDPoPTests.redeem(fixture, client, headers: try instance.headers(attestation))
            #expect(tokens.status == .ok, "\(String(buffer: tokens.body))")
            let access = try #require(Route.json(tokens)["access_token"]?.stringValue)
            #expect(try RelayDPoPTests.claims(access)["attested"] == .string("passphrase"))
            // The development attester was not registered: its route does not exist.
            let dev = try await Attestation.post(client, "/attest/dev", [("client_id", "app"), ("jwk", instance.jwk)])
            #expect(dev.status == .notFound)
        }
    }
}
