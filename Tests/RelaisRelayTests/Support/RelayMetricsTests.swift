import Foundation
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySignInAndTokensChain {
    /// The operator's counters at `/metrics`: each sign-in outcome, sessions opened and ended by
    /// reason, and replays, counted exactly over a scripted run of a real relay.
    @Suite struct RelayMetricsTests {
        @Test func signInOutcomesSessionsAndReplaysAreCounted() async throws {
            let harness = try await RelayHarness.launch(inProcess: false)
            // Two sign-ins that succeed and open sessions.
            let first = try await harness.tokens()
            _ = try await harness.tokens()
            // A person who cancels at the provider, and a provider whose id_token fails a check.
            _ = try await harness.callback(try await harness.throughProvider(RelayHarness.AppRequest(), identity: nil))
            try await harness.armProvider("id_token:wrong_nonce")
            _ = try await harness.callback(try await harness.throughProvider(RelayHarness.AppRequest()))
            // A replayed callback: its transaction is gone.
            let request = RelayHarness.AppRequest()
            let toRelay = try await harness.throughProvider(request)
            let landing = try await harness.callback(toRelay)
            _ = try await harness.callback(toRelay)
            // That sign-in's code used twice: the session it opened ends.
            let landingLocation = try #require(landing.header("location"))
            let code = try #require(try RelayHarness.query(landingLocation)["code"])
            #expect(try await harness.exchange(code, request).status == 200)
            #expect(try await harness.exchange(code, request).status == 400)
            // A refresh token reused two rotations later, which no grace window answers (the
            // binary runs on the system clock: waiting out the window would take real time): that
            // session ends too.
            let oldRefresh = try #require(first["refresh_token"]?.stringValue)
            let rotated = try await harness.refresh(oldRefresh)
            #expect(rotated.status == 200)
            let newRefresh = try #require(JSONValue.object(from: rotated.body)?["refresh_token"]?.stringValue)
            #expect(try await harness.refresh(newRefresh).status == 200)
            #expect(try await harness.refresh(oldRefresh).status == 400)
            // An app revokes one, and logs one out.
            let revoked = try await harness.tokens()
            #expect(try await harness.post(harness.issuer + "/revoke", [("client_id", "app"), ("token", try #require(revoked["refresh_token"]?.stringValue))]).status == 200)
            let loggedOut = try await harness.tokens()
            #expect(
                try await harness.post(harness.issuer + "/logout", [("client_id", "app"), ("refresh_token", try #require(loggedOut["refresh_token"]?.stringValue))]).status == 204)

            let metrics = try await harness.metrics()
            let signIns = #"relais_signins_total{provider="fc",client_id="app",outcome="#
            #expect(metrics[signIns + #""ok"}"#] == 5)
            #expect(metrics[signIns + #""cancelled"}"#] == 1)
            #expect(metrics[signIns + #""provider_id_token_rejected"}"#] == 1)
            #expect(metrics[#"relais_signins_total{provider="unknown",client_id="unknown",outcome="transaction_expired"}"#] == 1)
            #expect(metrics[#"relais_sessions_opened_total{client_id="app"}"#] == 5)
            #expect(metrics[#"relais_sessions_ended_total{reason="code_replay"}"#] == 1)
            #expect(metrics[#"relais_sessions_ended_total{reason="refresh_reuse"}"#] == 1)
            #expect(metrics[#"relais_sessions_ended_total{reason="revoked"}"#] == 1)
            #expect(metrics[#"relais_sessions_ended_total{reason="logout"}"#] == 1)
            #expect(metrics[#"relais_security_events_total{event="code_replay"}"#] == 1)
            #expect(metrics[#"relais_security_events_total{event="refresh_reuse"}"#] == 1)
            #expect(metrics[#"relais_security_events_total{event="logout_token_replay"}"#] == nil)
        }
    }
}
