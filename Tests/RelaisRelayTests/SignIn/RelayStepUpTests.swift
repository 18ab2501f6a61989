import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// RFC 9470 step-up: a resource's challenge, then a sign-in at the provider that gives the level
/// (FranceConnect to FranceConnect+), which replaces the app's session for the same person only.
@Suite(.tags(.fast)) struct StepUpRequirementTests {
    @Test func levelsAndAgesAreCheckedAndNamedInTheChallenge() throws {
        let order = ["eidas1", "eidas2", "eidas3"]
        let options = try #require(FormParameters(encoded: "acr=eidas2&max_age=600"))
        let requirement = try #require(try StepUpRequirement(options))
        try requirement.check(acr: "eidas3", acrOrder: order, authTime: 1000, now: 1500, dpop: false)
        #expect(throws: RelayError.insufficientUserAuthentication("the sign-in level is below eidas2", .init(acrValues: "eidas2", maxAge: 600))) {
            try requirement.check(acr: "eidas1", acrOrder: order, authTime: 1000, now: 1500, dpop: false)
        }
        var old = RelayError.insufficientUserAuthentication("the sign-in is older than max_age (600 s)", .init(acrValues: "eidas2", maxAge: 600))
        #expect(throws: old) { try requirement.check(acr: "eidas2", acrOrder: order, authTime: 1000, now: 1601, dpop: false) }
        #expect(throws: old) { try requirement.check(acr: "eidas2", acrOrder: order, authTime: nil, now: 1601, dpop: false) }
        old.challengesDPoP = true
        #expect(throws: old) { try requirement.check(acr: "eidas2", acrOrder: order, authTime: nil, now: 1601, dpop: true) }
        #expect(old.dpopChallenge.hasSuffix(#", acr_values="eidas2", max_age=600"#))
        #expect(old.challenge.contains(#"error="insufficient_user_authentication""#))
        // Not on the provider's scale: no level can be proven.
        #expect(throws: RelayError.self) { try requirement.check(acr: "eidas2", acrOrder: ["eidas1"], authTime: 1500, now: 1500, dpop: false) }
        #expect(try StepUpRequirement(FormParameters(encoded: "scope=x")) == nil)
        for bad in ["max_age=-1", "max_age=x", "max_age=12345678901"] {
            #expect(throws: RelayError.self) { try StepUpRequirement(FormParameters(encoded: bad)) }
        }
    }

    /// A challenge's quoted values hold only what RFC 6750 §3 allows: a `"` or `\` (which could
    /// end the value early and add parameters of the requester's choosing) becomes `'`, anything
    /// outside printable ASCII `?`.
    @Test func challengeValuesCannotEndTheirQuotesEarly() {
        let error = RelayError.insufficientUserAuthentication("level x\\", .init(acrValues: #"x",error="invalid_token"#, maxAge: nil))
        for challenge in [error.challenge, error.dpopChallenge] {
            #expect(challenge.hasSuffix(#"error_description="level x'", acr_values="x',error='invalid_token""#), "\(challenge)")
        }
        #expect(RelayError.quotable("é\u{7}ok") == "??ok")
    }

    @Test func thePivotDecidesWhetherTwoSignInsAreOnePerson() {
        let angela = [
            "given_name": "Angela Claire Louise", "family_name": "DUBOIS", "birthdate": "1962-08-24", "gender": "female", "birthplace": "75107", "birthcountry": "99100",
        ].mapValues(JSONValue.string)
        var other = angela
        #expect(IdentityPivot.matches(angela, other))
        other["sub"] = .string("another-sub")
        other["email"] = .string("x@example.fr")
        #expect(IdentityPivot.matches(angela, other))
        for name in IdentityPivot.claims {
            var changed = angela
            changed[name] = .string("x")
            #expect(!IdentityPivot.matches(angela, changed), "\(name)")
            var missing = angela
            missing[name] = nil
            #expect(!IdentityPivot.matches(angela, missing), "\(name)")
        }
        // Born abroad: no birthplace on either side is the same person.
        var abroad = angela
        abroad["birthplace"] = nil
        #expect(IdentityPivot.matches(abroad, abroad))
        #expect(!IdentityPivot.matches([:], [:]))
    }
}

extension RelaySignInAndTokensChain {
    @Suite struct RelayStepUpTests {
        /// Sign-in at FranceConnect+ for a step-up: /authorize with acr_values and the app's id_token_hint.
        func stepUp(_ harness: RelayHarness, _ request: RelayHarness.AppRequest, identity: String) async throws -> HTTPClientResponse {
            let start = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: request.parameters))
            let toProvider = try #require(start.header("location"), "\(start.status) \(start.bodyText)")
            let fcplus = try #require(harness.stepUpProvider)
            try #require(toProvider.hasPrefix(fcplus.baseURL + "/api/v2/authorize"), "went to \(toProvider)")
            #expect(toProvider.contains("acr_values=eidas2"))
            #expect(toProvider.contains("prompt=login"))
            let interaction = try await harness.get(toProvider)
            let page = try await harness.get(try #require(interaction.header("location"), "\(interaction.status) \(interaction.bodyText)"))
            let action = try #require(page.bodyText.firstMatch(of: /action="([^"]+)"/)?.1)
            let submit = try await harness.post(fcplus.baseURL + action, [("identity", identity)])
            return try await harness.callback(try #require(submit.header("location")))
        }

        @Test func aStepUpReplacesTheSessionOfTheSamePersonOnly() async throws {
            let key = try TestKeys.rsa(use: "enc", pinAlgorithm: false)
            let harness = try await RelayHarness.launch(stepUpKey: key)
            let first = try await harness.tokens()
            let access = try #require(first["access_token"]?.stringValue)
            let idToken = try #require(first["id_token"]?.stringValue)
            let firstClaims = try #require(JSONValue.object(from: try JWS.parse(access).payload))
            #expect(firstClaims["acr"] == .string("eidas1") && firstClaims["auth_time"]?.numberValue != nil)

            // The API needs eidas2: the gateway's answer says so.
            let challenge = try await harness.http.send(HTTPClientRequest(url: harness.issuer + "/auth?acr=eidas2", headers: [(name: "Authorization", value: "Bearer " + access)]))
            #expect(challenge.status == 401)
            #expect(challenge.header("www-authenticate")?.hasSuffix(#"error_description="the sign-in level is below eidas2", acr_values="eidas2""#) == true)

            // Another person at FranceConnect+: refused, and the app keeps its session.
            var wrong = RelayHarness.AppRequest()
            wrong.extra = [("acr_values", "eidas2"), ("max_age", "0"), ("id_token_hint", idToken)]
            let refused = try await stepUp(harness, wrong, identity: "pierre")
            let refusal = try RelayHarness.query(try #require(refused.header("location")))
            #expect(refusal["error"] == "step_up_identity_mismatch")
            #expect(try await harness.userinfo(access).status == 200)

            // The same person: a new session at eidas2; the old one ends when the code is redeemed.
            var right = RelayHarness.AppRequest()
            right.extra = [("acr_values", "eidas2"), ("max_age", "0"), ("id_token_hint", idToken)]
            let callback = try RelayHarness.query(try #require(try await stepUp(harness, right, identity: "angela").header("location")))
            let exchanged = try await harness.exchange(try #require(callback["code"], "\(callback.oauthError ?? "")"), right)
            let second = try #require(JSONValue.object(from: exchanged.body))
            let secondAccess = try #require(second["access_token"]?.stringValue, "\(second)")
            let claims = try #require(JSONValue.object(from: try JWS.parse(secondAccess).payload))
            #expect(claims["acr"] == .string("eidas2") && claims["idp"] == .string("fcplus"))
            #expect(claims["sub"] != firstClaims["sub"])  // FranceConnect+ has its own subs
            #expect(
                try await harness.http.send(HTTPClientRequest(url: harness.issuer + "/auth?acr=eidas2", headers: [(name: "Authorization", value: "Bearer " + secondAccess)])).status
                    == 200)
            #expect(try await harness.userinfo(access).status == 401)
            #expect(try await harness.refresh(try #require(first["refresh_token"]?.stringValue)).status == 400)

            // A hint that is not Relais' id_token for this app is refused, never ignored.
            var forged = RelayHarness.AppRequest()
            forged.extra = [("acr_values", "eidas2"), ("id_token_hint", "x.y.z")]
            let start = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: forged.parameters))
            #expect(try RelayHarness.query(try #require(start.header("location")))["error"] == "invalid_request")
        }
    }
}
