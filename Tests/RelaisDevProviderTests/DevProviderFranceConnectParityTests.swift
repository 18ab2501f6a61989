import Foundation
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

extension DevProviderProcessTests {
    /// Where the development provider follows FranceConnect's published source (github
    /// `france-connect/sources`) behaviour by behaviour: each test names the file it follows.
    @Suite struct DevProviderFranceConnectParityTests {
        static func userinfoClaims(_ client: ProviderClient, _ tokens: [String: JSONValue], decryptingWith key: JWK? = nil) async throws -> VerifiedClaims {
            let response = try await client.userinfo(try #require(tokens["access_token"]?.stringValue))
            var signed = response.bodyText
            if let key { signed = try JWE.parse(signed).decrypt(with: JWKSet(keys: [key])).plaintextString }
            return try await client.verify(signed, nonce: nil)
        }

        /// `quality/fcp/cypress/integration/usager/connexion-scope.feature`, "attribut scope inconnu
        /// ignoré": an unknown scope is dropped, on the mode's own catalogue (v2: fcp-low, where
        /// `siret` and `rnipp_birthdate` are unknown alike).
        @Test func unknownScopesAreDroppedNotRefused() async throws {
            let client = try await ProviderClient.launch()
            let tokens = try await client.tokens(scope: "openid profile inconnu siret rnipp_birthdate")
            let claims = try await Self.userinfoClaims(client, tokens)
            #expect(claims.string("given_name")?.hasPrefix("Angela") == true && claims["given_name_array"] != nil)
            for dropped in ["siret", "rnipp_birthdate", "inconnu"] { #expect(claims[dropped] == nil, "\(dropped)") }
        }

        /// Same feature, "erreur FS non habilité pour ce scope": a known scope the service is not
        /// entitled to is `invalid_scope`, "requested scope is not allowed".
        @Test func aKnownScopeTheServiceIsNotEntitledToIsRefused() async throws {
            let clients = ProviderClient.clients.replacingOccurrences(
                of: "    post_logout_redirect_uris: [http://127.0.0.1:9/logged-out]\n",
                with: "    post_logout_redirect_uris: [http://127.0.0.1:9/logged-out]\n    scopes: [openid, profile]\n"
            )
            let client = try await ProviderClient.launch(clients: clients)
            let refused = try await client.authorize(client.authorizeParameters(scope: "openid profile email"))
            let query = try ProviderClient.query(of: try #require(refused.header("location")))
            #expect(query["error"] == "invalid_scope" && query["error_description"] == "requested scope is not allowed")
            // An unknown scope is still dropped for an entitled service.
            #expect(try await client.tokens(scope: "openid profile inconnu")["access_token"] != nil)
        }

        static func fcplusClient(_ key: JWK) async throws -> ProviderClient {
            let clients = """
                  app:
                    secret: app-secret-0123456789-0123456789-abcdef
                    redirect_uris: [http://127.0.0.1:9/callback]
                    post_logout_redirect_uris: [http://127.0.0.1:9/logged-out]
                    jwks: '\(DevProviderModesTests.jwks([key]))'
                    encryption_alg: RSA-OAEP-256
                """
            return try await ProviderClient.launch(mode: "fcplus", clients: clients)
        }

        /// `back/libs/scopes/src/data/fcp-high/fcp-high.scopes.ts`: FranceConnect+ has the `rnipp_*`
        /// scopes and no `given_name_array` (only `rnipp_given_name_array`, through `rnipp_given_name`).
        @Test func franceConnectPlusHasItsOwnCatalogue() async throws {
            let key = try TestKeys.rsa(keyID: "app-enc", use: "enc", pinAlgorithm: false)
            let client = try await Self.fcplusClient(key)
            let plain = try await Self.userinfoClaims(client, try await client.tokens(as: "pierre", scope: "openid profile", acr: "eidas2"), decryptingWith: key)
            #expect(plain.string("given_name") == "Pierre" && plain["given_name_array"] == nil)
            let rnipp = try await Self.userinfoClaims(
                client, try await client.tokens(as: "pierre", scope: "openid rnipp_given_name rnipp_birthdate", acr: "eidas2"), decryptingWith: key
            )
            #expect(rnipp.string("rnipp_given_name") == "Pierre" && rnipp["rnipp_given_name_array"] == .array([.string("Pierre")]))
            #expect(rnipp.string("rnipp_birthdate") == rnipp.string("birthdate") && rnipp.string("birthdate") != nil)
            #expect(rnipp["given_name_array"] == nil)
        }

        /// `back/libs/core/src/transforms/acr.transform.ts` (`pickAcr`) and `CoreAcrService`: the
        /// weakest known level asked for, the mode's default when none is known, then the mode's
        /// allowed levels; the rows of `connexion-acr-fcp-low.feature` and `-fcp-high.feature`.
        @Test func severalOrUnknownAcrValuesFollowPickAcr() async throws {
            let low = try await ProviderClient.launch()
            for (asked, performed) in [("eidas1", "eidas1"), ("niveau_inconnu", "eidas1"), ("eidas1 eidas2 eidas3", "eidas1"), ("inconnu eidas1", "eidas1")] {
                let tokens = try await low.tokens(scope: "openid", acr: asked)
                #expect(try await low.verify(try #require(tokens["id_token"]?.stringValue)).acr == performed, "\(asked)")
            }
            for (asked, got) in [("eidas2", "eidas2"), ("eidas2 eidas3", "eidas2"), ("inconnu eidas3", "eidas3")] {
                let refused = try await low.authorize(low.authorizeParameters(acr: asked))
                let query = try ProviderClient.query(of: try #require(refused.header("location")))
                #expect(query["error"] == "invalid_acr")
                #expect(query["error_description"] == "acr_value is not valid, should be equal one of these values, expected eidas1, got \(got)", "\(asked)")
            }
            let key = try TestKeys.rsa(keyID: "app-enc", use: "enc", pinAlgorithm: false)
            let high = try await Self.fcplusClient(key)
            for (asked, performed) in [("niveau_inconnu", "eidas3"), ("eidas3 eidas2", "eidas2"), ("eidas2 niveau_inconnu", "eidas2")] {
                let tokens = try await high.tokens(as: "pierre", scope: "openid", acr: asked)
                let idToken = try JWE.parse(try #require(tokens["id_token"]?.stringValue)).decrypt(with: JWKSet(keys: [key])).plaintextString
                #expect(try await high.verify(idToken).acr == performed, "\(asked)")
            }
            let refused = try await high.authorize(high.authorizeParameters(acr: "inconnu eidas1"))
            #expect(
                try ProviderClient.query(of: try #require(refused.header("location")))["error_description"]
                    == "acr_value is not valid, should be equal one of these values, expected eidas2,eidas3, got eidas1")
        }

        /// `quality/fcp/cypress/integration/api/api-token.feature` and `api-userinfo.feature`: the
        /// JWS header has exactly `alg` and `kid`; FranceConnect+'s JWE header also names `iss` and
        /// `aud` (6 members with RSA-OAEP-256).
        @Test func tokenHeadersAreFranceConnects() async throws {
            let low = try await ProviderClient.launch()
            let lowToken = try #require(try await low.tokens()["id_token"]?.stringValue)
            #expect(Set(try Self.header(of: lowToken).keys) == ["alg", "kid"])

            let key = try TestKeys.rsa(keyID: "app-enc", use: "enc", pinAlgorithm: false)
            let high = try await Self.fcplusClient(key)
            let tokens = try await high.tokens(as: "pierre", scope: "openid profile", acr: "eidas2")
            let userinfo = try await high.userinfo(try #require(tokens["access_token"]?.stringValue)).bodyText
            for token in [try #require(tokens["id_token"]?.stringValue), userinfo] {
                let header = try Self.header(of: token)
                #expect(Set(header.keys) == ["alg", "enc", "cty", "kid", "iss", "aud"], "\(header)")
                #expect(header["iss"] == .string(high.issuer) && header["aud"] == .string("app"))
                let inner = try JWE.parse(token).decrypt(with: JWKSet(keys: [key])).plaintextString
                #expect(Set(try Self.header(of: inner).keys) == ["alg", "kid"])
            }
        }

        static func header(of token: String) throws -> [String: JSONValue] {
            let first = try #require(token.split(separator: ".").first)
            let bytes = try #require(Base64URL.decode(String(first)))
            return try #require(JSONValue.object(from: bytes))
        }

        /// `back/libs/oidc-provider/src/dto/logout-params.dto.ts`: `state` and
        /// `post_logout_redirect_uri` are optional; `id_token_hint` is required.
        @Test func logoutTakesStateAndTheRedirectAsOptional() async throws {
            let client = try await ProviderClient.launch()
            let idToken = try #require(try await client.tokens()["id_token"]?.stringValue)
            let noState = try await client.get(
                FormParameters.url(
                    client.issuer + "/session/end",
                    adding: [
                        ("id_token_hint", idToken), ("post_logout_redirect_uri", "http://127.0.0.1:9/logged-out"),
                    ]))
            #expect(noState.status == 303 && noState.header("location") == "http://127.0.0.1:9/logged-out")
            let again = try #require(try await client.tokens()["id_token"]?.stringValue)
            let nowhere = try await client.get(FormParameters.url(client.issuer + "/session/end", adding: [("id_token_hint", again)]))
            #expect(nowhere.status == 200 && nowhere.bodyText.contains(#"id="signed-out""#))
            #expect(client.cookie == nil)
        }
    }
}
