import Foundation
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisConfig

/// `relais dev-provider`'s configuration: the shipped file, overrides, and every problem reported at once.
@Suite(.tags(.fast)) struct DevProviderConfigurationTests {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    private static let example = root.appendingPathComponent("config/dev-provider.yaml").path
    private static let identities = root.appendingPathComponent("config/dev-identities.yaml").path

    private func file(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("relais-dev-provider-\(UUID().uuidString).yaml")
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    private func problems(_ yaml: String, environment: [String: String] = [:]) async throws -> [String] {
        let path = try file(yaml)
        do {
            _ = try await ConfigurationLoader.loadDevProvider(filePath: path, environment: environment)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    @Test func theShippedFileIsValid() async throws {
        let configuration = try await ConfigurationLoader.loadDevProvider(filePath: Self.example, environment: ["DEV_PROVIDER_SERVER_PORT": "9123"])
        #expect(configuration.server.port == 9123)
        #expect(configuration.provider.mode == .v2)
        #expect(configuration.store.kind == .embedded)
        #expect(configuration.provider.codeLifetime == .seconds(30))
        let client = try #require(configuration.clients.first)
        #expect(client.id == "relais-local")
        #expect(client.redirectURIs == ["http://127.0.0.1:8080/callback"])
        #expect(client.authentication == .clientSecretPost)
        #expect(configuration.identities.map(\.id) == ["angela", "pierre", "karima"])
        #expect(configuration.identities[0].claims["birthplace"] == "75107")
    }

    @Test func everyProblemIsReportedWithItsKey() async throws {
        let found = try await problems(
            """
            provider:
              mode: v3
              identities_file: \(Self.identities)
              code_lifetime: soon
            clients:
              app:
                secret: short
                redirect_uri: [http://127.0.0.1/cb]
                token_endpoint_auth_method: client_secret_basic
              "bad id":
                redirect_uris: [x]
              keyless:
                token_endpoint_auth_method: private_key_jwt
                redirect_uris: "http://127.0.0.1/cb"
            """,
            environment: ["DEV_PROVIDER_SERVER_PROT": "1"]
        )
        #expect(found.contains("DEV_PROVIDER_SERVER_PROT: unknown environment variable (no configuration key maps to it)"))
        #expect(found.contains("provider.mode: expected one of v2, v1, fcplus, proconnect; got 'v3'"))
        #expect(found.contains("provider.code_lifetime: expected a positive duration with a unit (250ms, 3s, 5m, 1h, 30d), got 'soon'"))
        #expect(found.contains("clients.app.redirect_uri: unknown key (did you mean 'redirect_uris'?) (line 8)"))
        #expect(found.contains("clients.app.token_endpoint_auth_method: expected one of client_secret_post, private_key_jwt; got 'client_secret_basic'"))
        #expect(found.contains("clients.app.redirect_uris: list at least one redirect URI"))
        #expect(found.contains("clients: ids may hold only letters, digits, '-' and '_' (line 10)"))
        #expect(found.contains("clients.keyless.redirect_uris: expected a list of values, such as [a, b] (line 14)"))
        #expect(found.contains("clients.keyless.jwks: private_key_jwt needs the client's public keys (jwks, jwks_file or jwks_uri)"))
    }

    @Test func modesAskForWhatTheyNeed() async throws {
        let client = """
            clients:
              app:
                secret: short-secret
                redirect_uris: [http://127.0.0.1/cb]
            """
        let v1 = try await problems("provider:\n  mode: v1\n  identities_file: \(Self.identities)\n" + client)
        #expect(v1 == ["clients.app.secret: mode v1 uses the secret as an HS256 key: it needs at least 32 bytes"])
        let plus = try await problems("provider:\n  mode: fcplus\n  identities_file: \(Self.identities)\n" + client)
        #expect(plus == ["clients.app.jwks: mode fcplus encrypts to the client's public key: set jwks, jwks_file or jwks_uri"])
        let key = try TestKeys.rsa(use: "enc", pinAlgorithm: false)
        let privateSet = "{\"keys\":[\(String(decoding: JSONValue.object(try #require(key.publicJSON())).serialized(), as: UTF8.self))]}"
        #expect(try await problems("provider:\n  mode: fcplus\n  identities_file: \(Self.identities)\n" + client + "\n    jwks: '\(privateSet)'").isEmpty)
        let broken = try await problems("provider:\n  identities_file: \(Self.identities)\n" + client + "\n    jwks: '{\"keys\":[{\"kty\":\"RSA\"}]}'")
        #expect(broken.count == 1 && broken[0].hasPrefix("clients.app.jwks: not a usable JWK set"))
        #expect(try await problems("provider:\n  identities_file: \(Self.identities)\n") == ["clients: register at least one client (clients.<client_id>.redirect_uris)"])
    }

    @Test func identitiesAreChecked() async throws {
        let people = try file(
            """
            zoe:
              given_name: Zoé
              family_name: MARTIN
              birthdate: 12/03/1990
              gender: x
              birthcountry: "99100"
              shoe_size: "42"
            ana:
              given_name: Ana
            """
        )
        let found = try await problems("provider:\n  identities_file: \(people)\nclients:\n  app:\n    secret: s\n    redirect_uris: [http://127.0.0.1/cb]\n")
        #expect(found.contains("provider.identities_file: \(people): identity 'zoe' birthdate must be YYYY-MM-DD"))
        #expect(found.contains("provider.identities_file: \(people): identity 'zoe' gender must be male or female"))
        #expect(found.contains("provider.identities_file: \(people): identity 'zoe' has an unknown or non-text claim 'shoe_size'"))
        #expect(found.contains("provider.identities_file: \(people): identity 'ana' lacks 'family_name'"))
        let missing = try await problems("provider:\n  identities_file: /nonexistent/people.yaml\nclients:\n  app:\n    secret: s\n    redirect_uris: [http://127.0.0.1/cb]\n")
        #expect(missing == ["provider.identities_file: cannot open /nonexistent/people.yaml: No such file or directory"])
    }

    @Test func proConnectAgentsAreCheckedByTheirOwnRules() async throws {
        let client = "clients:\n  app:\n    secret: s\n    redirect_uris: [http://127.0.0.1/cb]\n"
        // The shipped agents, the mode's default file.
        let shipped = Self.root.appendingPathComponent("config/dev-identities-proconnect.yaml").path
        #expect(try await problems("provider:\n  mode: proconnect\n  identities_file: \(shipped)\n" + client).isEmpty)
        let agents = try file(
            """
            lea:
              given_name: Léa
              usual_name: ROUX
              email: lea@example.fr
              uid: "1"
              siret: "123"
              idp_id: idp-1
              acr: gold
              birthdate: "1990-01-01"
            tom:
              given_name: Tom
            """
        )
        let found = try await problems("provider:\n  mode: proconnect\n  identities_file: \(agents)\n" + client)
        #expect(found.contains("provider.identities_file: \(agents): identity 'lea' siret must be 14 digits"))
        #expect(found.contains { $0.hasPrefix("provider.identities_file: \(agents): identity 'lea' acr must be one of eidas0, eidas0-mfa,") })
        #expect(found.contains("provider.identities_file: \(agents): identity 'lea' has an unknown or non-text claim 'birthdate'"))
        for claim in ["usual_name", "email", "uid", "siret", "idp_id"] {
            #expect(found.contains("provider.identities_file: \(agents): identity 'tom' lacks '\(claim)'"))
        }
        #expect(!found.contains { $0.contains("lacks 'family_name'") })
        // FranceConnect's people are not agents.
        #expect(
            try await problems("provider:\n  mode: proconnect\n  identities_file: \(Self.identities)\n" + client).contains {
                $0.hasSuffix("identity 'angela' lacks 'usual_name'")
            })
    }
}
