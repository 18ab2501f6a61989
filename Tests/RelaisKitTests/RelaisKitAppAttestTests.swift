import Foundation
import RelaisHTTPClient
import Testing

@testable import RelaisKit

/// The App Attest decisions of the core (attest once per installation, assert afterwards, a new
/// key once after `invalidKey`) with a scripted `DCAppAttestService`. The relay of the tests has no
/// Apple root to check real attestations against, so the transport turns each `/attest/apple*`
/// request into the development attester's request for the same challenge and instance key: the
/// Client Attestation JWT the client gets, and uses at `/token`, is Relais' own.
@Suite struct RelaisKitAppAttestTests {
    final class ScriptedAppAttest: AppAttestService, @unchecked Sendable {
        let lock = NSLock()
        var generated = 0
        var calls: [String] = []
        var invalidateNextAssertion = false

        var isSupported: Bool { true }

        func generateKey() async throws -> String {
            lock.withLock {
                generated += 1
                calls.append("generateKey")
                return Data(repeating: UInt8(generated), count: 32).base64EncodedString()
            }
        }

        func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data {
            lock.withLock { calls.append("attestKey") }
            return Data("attestation of \(keyID)".utf8)
        }

        func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data {
            try lock.withLock {
                calls.append("generateAssertion")
                if invalidateNextAssertion {
                    invalidateNextAssertion = false
                    throw RelaisKitError(.appAttestInvalidKey, "scripted invalidKey")
                }
                return Data("assertion by \(keyID)".utf8)
            }
        }
    }

    /// Forwards to the relay; `/attest/apple` and `/attest/apple/assertion` become `/attest/dev`.
    final class AppleToDev: HTTPTransport, @unchecked Sendable {
        let inner = CountingTransport()
        let lock = NSLock()
        var apple: [(path: String, fields: [String: String])] = []

        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            guard request.url.path.hasPrefix("/attest/apple") else { return try await inner.send(request) }
            let fields = FormEncoding.decode(String(decoding: request.body ?? Data(), as: UTF8.self))
            lock.withLock { apple.append((request.url.path, fields)) }
            let clientData = try #require(Base64URL.decode(fields["client_data"] ?? ""))
            let object = try #require(JSONReading.object(clientData))
            let dev = URL(string: request.url.absoluteString.replacingOccurrences(of: request.url.path, with: "/attest/dev"))!
            return try await inner.send(.form(dev, [("client_id", fields["client_id"] ?? ""), ("challenge", object.string("challenge") ?? ""), ("jwk", fields["jwk"] ?? "")]))
        }
    }

    @Test func attestOnceThenAssertAndANewKeyOnceAfterInvalidKey() async throws {
        let harness = try await KitHarness.launch()
        let service = ScriptedAppAttest()
        let transport = AppleToDev()
        let client = RelaisClient(
            configuration: .init(issuer: harness.issuer, clientID: "secure", scopes: ["openid", "profile"], dpop: true, attestation: .appAttest(service)),
            platform: RelaisPlatform(
                transport: transport, storage: MemoryStorage(),
                web: LoopbackWebAuthenticator { url in try await KitHarness.Browser(harness: harness, identity: "angela").follow(url) },
                clock: KitClock(clock: harness.clock)
            )
        )
        let summary = try await client.signIn()
        #expect(summary.attested == "dev")
        // The first attestation: a new key, attested, sent to /attest/apple with client data naming the instance key.
        #expect(service.calls == ["generateKey", "attestKey"])
        let first = try #require(transport.apple.first)
        #expect(first.path == "/attest/apple" && first.fields["attestation"] != nil && first.fields["key_id"] != nil)
        let decoded = try #require(Base64URL.decode(first.fields["client_data"] ?? ""))
        let clientData = try #require(JSONReading.object(decoded))
        #expect(clientData.string("jkt") == summary.dpopThumbprint)

        // The attestation expired: an assertion by the same key, to /attest/apple/assertion.
        try await client.forgetAttestation()
        try await client.refresh()
        #expect(service.calls.suffix(1) == ["generateAssertion"])
        #expect(transport.apple.last?.path == "/attest/apple/assertion" && transport.apple.last?.fields["key_id"] == first.fields["key_id"])

        // App Attest lost the key (a restore): one new key, attested again.
        try await client.forgetAttestation()
        service.invalidateNextAssertion = true
        try await client.refresh()
        #expect(service.calls.suffix(3) == ["generateAssertion", "generateKey", "attestKey"])
        #expect(transport.apple.last?.path == "/attest/apple" && transport.apple.last?.fields["key_id"] != first.fields["key_id"])
        #expect(service.generated == 2)
    }
}
