import Foundation
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

extension DevProviderProcessTests {
    /// The ProConnect mode: its agents and claims, a public `sub`, levels required through `claims`
    /// or wished through `acr_values`, `idp_hint`, and the parameters it ignores or refuses.
    @Suite struct DevProviderProConnectTests {
        static let scope = "openid given_name usual_name email uid siret organizational_unit phone"

        static func parameters(_ client: ProviderClient, _ extra: [(String, String)] = [], scope: String = scope) -> [(String, String)] {
            client.authorizeParameters(scope: scope).filter { $0.0 != "acr_values" } + extra
        }

        /// The token response for a callback's code.
        static func tokens(_ client: ProviderClient, _ callback: FormParameters) async throws -> [String: JSONValue] {
            let code = try #require(callback["code"], "\(callback["error"] ?? "no code")")
            return try #require(JSONValue.object(from: try await client.exchange(code: code).body))
        }

        static func essential(_ levels: [String]) -> String {
            let values = levels.map { "\"\($0)\"" }.joined(separator: ",")
            return #"{"id_token":{"acr":{"essential":true,"values":["# + values + "]}}}"
        }

        @Test func anAgentSignsInWithProConnectsClaimsAndAPublicSubject() async throws {
            let client = try await ProviderClient.launch(mode: "proconnect")
            let discovery = try #require(JSONValue.object(from: try await client.get(client.issuer + "/.well-known/openid-configuration").body))
            #expect(discovery["subject_types_supported"] == .array([.string("public")]))
            #expect(discovery["acr_values_supported"]?.arrayValue?.contains(.string("eidas1-mfa")) == true)
            #expect(discovery["scopes_supported"]?.arrayValue?.contains(.string("siret")) == true)
            #expect(discovery["scopes_supported"]?.arrayValue?.contains(.string("birthdate")) == false)

            // An unknown parameter is ignored (FranceConnect refuses it), an unknown scope dropped.
            let login = try await client.openLoginPage(Self.parameters(client, [("ui_theme", "dark")], scope: Self.scope + " birthdate"))
            #expect(login.page.contains("identity-camille") && login.page.contains("Direction du numérique"))
            let callback = try await client.post(login.action, [("identity", "camille")])
            let query = try ProviderClient.query(of: try #require(callback.header("location")))
            #expect(query["iss"] == client.issuer)
            let tokens = try await Self.tokens(client, query)
            let idToken = try await client.verify(try #require(tokens["id_token"]?.stringValue))
            #expect(idToken.acr == "eidas1")
            let subject = try #require(idToken.subject)
            #expect(subject.firstMatch(of: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/) != nil)
            let userinfo = try await client.userinfo(try #require(tokens["access_token"]?.stringValue))
            #expect(userinfo.header("content-type") == "application/jwt")
            let claims = try await client.verify(userinfo.bodyText, nonce: nil).claims
            #expect(claims["usual_name"] == .string("LEROY") && claims["siret"] == .string("11000601200010") && claims["uid"] == .string("9f1c2a7e-interieur"))
            #expect(claims["phone_number"] == .string("+33153000000") && claims["organizational_unit"] == .string("Direction du numérique"))
            #expect(claims["given_name_array"] == nil && claims["birthdate"] == nil && claims["siren"] == nil)

            // Public: another service gets the same sub for the same agent.
            let other = try await client.tokens(as: "camille", client: "other", scope: "openid", acr: "eidas1")
            #expect(try await client.verify(try #require(other["id_token"]?.stringValue), audience: "other").subject == subject)
        }

        @Test func aRequiredLevelIsMetOrRefusedAndAWishIsOnlyAWish() async throws {
            let client = try await ProviderClient.launch(mode: "proconnect")
            // camille's identity provider asserts eidas1: a service requiring eidas2 or more is refused.
            let required = Self.parameters(client, [("claims", Self.essential(["eidas2", "eidas3"]))])
            let refused = try await client.signIn(as: "camille", required)
            #expect(refused["error"] == "access_denied" && refused["error_description"] == "requested ACRs could not be satisfied")
            let met = try await client.signIn(as: "yanis", required)
            let tokens = try await Self.tokens(client, met)
            #expect(try await client.verify(try #require(tokens["id_token"]?.stringValue)).acr == "eidas2")
            // acr_values alone does not bind: the agent's own level is what the id_token says.
            let wished = try await client.signIn(as: "sophie", Self.parameters(client, [("acr_values", "eidas3")]))
            let wishedTokens = try await Self.tokens(client, wished)
            #expect(try await client.verify(try #require(wishedTokens["id_token"]?.stringValue)).acr == "eidas1-mfa")
            // Only unknown levels required: nothing can satisfy it.
            let unknown = try await client.authorize(Self.parameters(client, [("claims", Self.essential(["https://example.fr/loa/9"]))]))
            #expect(try ProviderClient.query(of: try #require(unknown.header("location")))["error"] == "access_denied")
        }

        @Test func idpHintOffersThatProvidersAgentsOnly() async throws {
            let client = try await ProviderClient.launch(mode: "proconnect")
            let login = try await client.openLoginPage(Self.parameters(client, [("idp_hint", "idp-finances")]))
            #expect(login.page.contains("identity-yanis") && !login.page.contains("identity-camille"))
            // An agent of another identity provider, posted anyway, is refused.
            let forged = try await client.post(login.action, [("identity", "camille")])
            #expect(forged.status == 400 && forged.bodyText.contains("Y000400"))
            let unknown = try await client.authorize(Self.parameters(client, [("idp_hint", "idp-nowhere")]))
            let query = try ProviderClient.query(of: try #require(unknown.header("location")))
            #expect(query["error"] == "idp_hint_not_found" && query["state"] != nil && query["iss"] == client.issuer)
        }

        @Test(arguments: [
            ([("prompt", "select_account")], "invalid_request"),
            ([("prompt", "none login")], "invalid_request"),
            ([("prompt", "none")], "login_required"),
            ([("claims", "not json")], "invalid_request"),
            ([("response_type", "token")], "unsupported_response_type"),
        ])
        func refusalsGoBackToTheService(extra: [(String, String)], error: String) async throws {
            let client = try await ProviderClient.launch(mode: "proconnect")
            var parameters = Self.parameters(client).filter { name, _ in !extra.contains { $0.0 == name } }
            parameters += extra
            let response = try await client.authorize(parameters)
            #expect(response.status == 303)
            #expect(try ProviderClient.query(of: try #require(response.header("location")))["error"] == error)
        }
    }
}
