import Foundation
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

extension RelaySignInAndTokensChain {
    /// The `proconnect` preset against the development provider in ProConnect mode: an agent's claims
    /// reach the app, a level is required through `claims`, and the app's `idp_hint` is passed on.
    @Suite struct RelayProConnectTests {
        static let scopes = "openid given_name usual_name email uid siret"

        static func launch() async throws -> RelayHarness {
            try await RelayHarness.launch(mode: "proconnect", appScopes: "[\(scopes.replacingOccurrences(of: " ", with: ", "))]")
        }

        static func request(_ extra: [(String, String)] = []) -> RelayHarness.AppRequest {
            var request = RelayHarness.AppRequest()
            request.scope = scopes
            request.extra = extra
            return request
        }

        @Test func anAgentsClaimsReachTheApp() async throws {
            let harness = try await Self.launch()
            let start = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: Self.request().parameters))
            let toProvider = try #require(start.header("location"))
            // No level asked: no claims parameter; PKCE on (ProConnect supports it).
            let sent = try RelayHarness.query(toProvider)
            #expect(sent["claims"] == nil && sent["acr_values"] == nil && sent["code_challenge_method"] == "S256")
            #expect(sent["scope"] == "openid given_name usual_name email uid siret")

            let tokens = try await harness.tokens(Self.request(), identity: "camille")
            let access = try #require(tokens["access_token"]?.stringValue)
            let claims = try #require(JSONValue.object(from: try JWS.parse(access).payload))
            #expect(claims["acr"] == .string("eidas1"))
            let userinfo = try #require(JSONValue.object(from: try await harness.userinfo(access).body))
            #expect(userinfo["usual_name"] == .string("LEROY") && userinfo["siret"] == .string("11000601200010"))
            #expect(userinfo["uid"] == .string("9f1c2a7e-interieur") && userinfo["email"] == .string("camille.leroy@interieur.gouv.fr"))
            // Not asked of ProConnect (not in the provider's scopes): not there.
            #expect(userinfo["organizational_unit"] == nil && userinfo["phone_number"] == nil)
        }

        @Test func aLevelTheAppAsksForIsRequiredOfProConnect() async throws {
            let harness = try await Self.launch()
            let eidas2 = Self.request([("acr_values", "eidas2")])
            let start = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: eidas2.parameters))
            let sent = try RelayHarness.query(try #require(start.header("location")))
            #expect(sent["acr_values"] == nil)
            #expect(sent["claims"] == #"{"id_token":{"acr":{"essential":true,"values":["eidas2","eidas3"]}}}"#)
            // camille's identity provider gives eidas1: ProConnect refuses, the app is told.
            let refused = try await harness.signIn(eidas2, identity: "camille")
            #expect(refused["error"] == "access_denied")
            let tokens = try await harness.tokens(Self.request([("acr_values", "eidas2")]), identity: "yanis")
            let stepped = try #require(tokens["access_token"]?.stringValue)
            let claims = try #require(JSONValue.object(from: try JWS.parse(stepped).payload))
            #expect(claims["acr"] == .string("eidas2"))
            // A level ProConnect does not have is refused at Relais.
            let unknown = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: Self.request([("acr_values", "eidas9")]).parameters))
            #expect(try RelayHarness.query(try #require(unknown.header("location")))["error"] == "invalid_request")
        }

        @Test func theAppsIdpHintIsPassedOnAndAnUnknownOneComesBack() async throws {
            let harness = try await Self.launch()
            let hinted = Self.request([("idp_hint", "idp-finances")])
            let start = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: hinted.parameters))
            let toProvider = try #require(start.header("location"))
            #expect(try RelayHarness.query(toProvider)["idp_hint"] == "idp-finances")
            let tokens = try await harness.tokens(Self.request([("idp_hint", "idp-finances")]), identity: "yanis")
            #expect(tokens["access_token"] != nil)

            // ProConnect knows no such identity provider: the app learns its request was wrong.
            let unknown = Self.request([("idp_hint", "idp-nowhere")])
            let toApp = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: unknown.parameters))
            let atProvider = try await harness.get(try #require(toApp.header("location")))
            let callback = try await harness.callback(try #require(atProvider.header("location")))
            let answer = try RelayHarness.query(try #require(callback.header("location")))
            #expect(answer["error"] == "invalid_request" && answer["error_description"]?.hasPrefix("the provider answered idp_hint_not_found") == true)
            #expect(answer["state"] == unknown.state)

            // Relais itself refuses a hint it could not pass on faithfully.
            for bad in ["", "two words", String(repeating: "x", count: 257)] {
                let response = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: Self.request([("idp_hint", bad)]).parameters))
                let refusal = try RelayHarness.query(try #require(response.header("location")))
                #expect(refusal["error_description"] == "idp_hint must be 1 to 256 visible ASCII characters", "\(bad)")
            }
        }
    }
}
