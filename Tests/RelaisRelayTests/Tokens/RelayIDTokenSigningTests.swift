import HTTPTypes
import HummingbirdTesting
import NIOCore
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// OpenID Connect Discovery 1.0 §3: `id_token_signing_alg_values_supported` must include RS256.
/// id_tokens are signed RS256 by Relais' RSA key unless the app asks for ES256; access tokens stay
/// with the active (EC) key; /jwks.json publishes both keys (issue 33, finding 9).
@Suite(.tags(.fast)) struct RelayIDTokenSigningTests {
    typealias Route = RelayRouteTests

    static func header(_ token: String) throws -> [String: JSONValue] {
        let encoded = try #require(token.split(separator: ".").first)
        return try #require(JSONValue.object(from: Base64URL.decode(String(encoded)) ?? []))
    }

    static func tokens(_ fixture: Route.Fixture, _ client: any TestClientProtocol) async throws -> (access: String, id: String) {
        let response = Route.json(try await RelayDPoPTests.redeem(fixture, client, headers: [:]))
        return (try #require(response["access_token"]?.stringValue, "\(response)"), try #require(response["id_token"]?.stringValue))
    }

    @Test func idTokensAreRS256ByDefaultAndEveryKeyIsPublished() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let (access, id) = try await Self.tokens(fixture, client)
            #expect(try Self.header(id)["alg"] == .string("RS256"))
            #expect(try Self.header(access)["alg"] == .string("ES256"))
            let jwks = try JWKSet(json: Array(buffer: try await client.execute(uri: "/jwks.json", method: .get).body))
            #expect(Set(jwks.keys.map(\.keyType)) == [.ec, .rsa])
            #expect(jwks.keys.allSatisfy { !$0.isPrivate })
            // A standard client verifies both with the published keys alone.
            try JWS.parse(id).verify(with: jwks)
            try JWS.parse(access).verify(with: jwks)
            let metadata = Route.json(try await client.execute(uri: "/.well-known/openid-configuration", method: .get))
            #expect(metadata["id_token_signing_alg_values_supported"] == .array([.string("RS256"), .string("ES256")]))
        }
    }

    @Test func anAppThatAsksForES256GetsES256IdTokens() async throws {
        let fixture = Route.Fixture { $0.apps[0].idTokenAlgorithm = .es256 }
        try await fixture.test { client in
            let (access, id) = try await Self.tokens(fixture, client)
            #expect(try Self.header(id)["alg"] == .string("ES256"))
            #expect(try Self.header(access)["alg"] == .string("ES256"))
            // A refresh signs the new id_token the same way.
            let refresh = try await RelayDPoPTests.refresh(
                client, try #require(Route.json(try await RelayDPoPTests.redeem(fixture, client, headers: [:]))["refresh_token"]?.stringValue), proof: nil)
            #expect(try Self.header(try #require(Route.json(refresh)["id_token"]?.stringValue))["alg"] == .string("ES256"))
        }
    }

    /// Configured keys: the EC active key signs access tokens, the configured RSA key id_tokens;
    /// nothing is generated.
    @Test func configuredKeysSignAsConfigured() async throws {
        let ec = try JWK(pem: try #require(try JWK.generate(for: .es256).privateKeyPEM()), keyID: "ec1", use: "sig", algorithm: "ES256")
        let rsa = try TestKeys.rsa(keyID: "rsa1")
        let fixture = Route.Fixture { configuration in
            configuration.keys.signingKeys = [ec, rsa]
            configuration.keys.activeSigningKey = "ec1"
            configuration.keys.activeRSAKey = "rsa1"
        }
        try await fixture.test { client in
            let (access, id) = try await Self.tokens(fixture, client)
            #expect(try Self.header(id)["kid"] == .string("rsa1") && Self.header(access)["kid"] == .string("ec1"))
            let jwks = try JWKSet(json: Array(buffer: try await client.execute(uri: "/jwks.json", method: .get).body))
            #expect(jwks.keys.compactMap(\.keyID).sorted() == ["ec1", "rsa1"])
        }
    }
}
