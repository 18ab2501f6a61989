import HTTPTypes
import HummingbirdTesting
import RelaisClock
import RelaisCrypto
import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Session checks answered in process: the store is asked once, revocations through Relais are
/// seen at once, and what is deleted behind Relais' back is seen within `SessionLiveness.maxAge`.
@Suite(.tags(.fast)) struct SessionLivenessTests {
    @Test func aLiveSessionIsKnownInProcessAndARevocationEndsItAtOnce() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test { client in
            let token = try await RelayRouteTests.accessToken(fixture, client)
            let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
            let sid = try #require(try await fixture.sessions.sessions(ofSubject: "sub-1", provider: "fc").first)
            #expect(try await client.execute(uri: "/auth?session=1", method: .get, headers: bearer).status == .ok)

            // Deleted behind Relais' back (no announcement): still known live, for at most maxAge.
            #expect(try await fixture.store.delete(RelayStore.Key.session(sid)))
            #expect(try await client.execute(uri: "/auth?session=1", method: .get, headers: bearer).status == .ok)
            var introspection = RelayRouteTests.formHeaders
            introspection[.authorization] = "Basic " + Base64.encode(Array("api:api-secret-0123456789-0123456789".utf8))
            let answer = try await client.execute(uri: "/introspect", method: .post, headers: introspection, body: RelayRouteTests.form([("token", token)]))
            #expect(RelayRouteTests.json(answer)["active"] == .bool(true))
            fixture.clock.advance(by: .seconds(Int64(SessionLiveness.maxAge) + 1))
            #expect(try await client.execute(uri: "/auth?session=1", method: .get, headers: bearer).status == .unauthorized)

            // Revoked through Relais (here by another RelayStore on the same store, as another
            // instance would): refused at the next check, whatever was cached.
            let before = try await fixture.sessions.sessions(ofSubject: "sub-1", provider: "fc")
            let second = try await RelayRouteTests.accessToken(fixture, client)
            let secondBearer: HTTPFields = [.authorization: "Bearer \(second)"]
            #expect(try await client.execute(uri: "/auth?session=1", method: .get, headers: secondBearer).status == .ok)
            let secondSid = try #require(try await fixture.sessions.sessions(ofSubject: "sub-1", provider: "fc").subtracting(before).first)
            #expect(try await fixture.sessions.revoke(secondSid, reason: .revoked))
            #expect(try await client.execute(uri: "/auth?session=1", method: .get, headers: secondBearer).status == .unauthorized)
        }
    }
}
