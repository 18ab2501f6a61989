import HTTPTypes
import HummingbirdTesting
import NIOCore
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// RFC 6749 §2.3.1: a public client may name itself in HTTP Basic with an empty password, as
/// requests-oauthlib does; `/token`, `/revoke` and `/device_authorization` accept it, and refuse
/// two different client ids in one request (issue 33, finding 10).
@Suite(.tags(.fast)) struct PublicClientTests {
    typealias Route = RelayRouteTests

    /// `Basic base64(id:password)`, both already form-encoded.
    static func basic(_ id: String, _ password: String = "") -> String {
        "Basic " + Base64.encode(Array((id + ":" + password).utf8))
    }

    enum Expected: Sendable, Equatable {
        case success(String)
        case failure(RelayError.Code)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var authorization: String?
        var form: String?
        /// The client id read, or the refusal's code.
        var expected: Expected
        var testDescription: String { "\(authorization ?? "-") / \(form ?? "-")" }
    }

    static let cases: [Case] = [
        Case(authorization: nil, form: "app", expected: .success("app")),
        Case(authorization: basic("app"), form: nil, expected: .success("app")),
        Case(authorization: basic("app"), form: "app", expected: .success("app")),
        Case(authorization: basic("app"), form: "", expected: .success("app")),
        Case(authorization: "basic " + Base64.encode(Array("app:".utf8)), form: nil, expected: .success("app")),
        Case(authorization: basic("a%3Ab"), form: nil, expected: .success("a:b")),
        Case(authorization: "Bearer abc", form: "app", expected: .success("app")),
        Case(authorization: basic("app"), form: "other", expected: .failure(.invalidRequest)),
        Case(authorization: basic("app", "secret"), form: nil, expected: .failure(.invalidClient)),
        Case(authorization: basic(""), form: "app", expected: .failure(.invalidClient)),
        Case(authorization: "Basic !!!", form: "app", expected: .failure(.invalidClient)),
        Case(authorization: "Basic " + Base64.encode(Array("app".utf8)), form: nil, expected: .failure(.invalidClient)),
        Case(authorization: nil, form: nil, expected: .failure(.invalidRequest)),
        Case(authorization: nil, form: "", expected: .failure(.invalidRequest)),
        Case(authorization: "Bearer abc", form: nil, expected: .failure(.invalidRequest)),
    ]

    @Test(arguments: cases)
    func theClientIDIsReadFromTheFormOrBasic(_ test: Case) {
        do {
            let client = try PublicClient(authorization: test.authorization, formClientID: test.form)
            #expect(test.expected == .success(client.id))
            #expect(client.viaBasic == (test.authorization?.lowercased().hasPrefix("basic ") ?? false))
        } catch let error as RelayError {
            #expect(test.expected == .failure(error.code), "\(error.description)")
            if error.code == .invalidClient { #expect(error.headers[.wwwAuthenticate] == #"Basic realm="relais""#) }
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    static func post(_ client: any TestClientProtocol, _ uri: String, basic: String?, _ fields: [(String, String)]) async throws -> TestResponse {
        var headers = Route.formHeaders
        if let basic { headers[.authorization] = basic }
        return try await client.execute(uri: uri, method: .post, headers: headers, body: Route.form(fields))
    }

    @Test func theThreeEndpointsAcceptAnAppInBasicWithAnEmptyPassword() async throws {
        let fixture = Route.Fixture { configuration in configuration.apps[0].deviceGrant = AppSettings.DeviceGrant() }
        try await fixture.test { client in
            let refresh = try await Self.post(client, "/token", basic: Self.basic("app"), [("grant_type", "refresh_token"), ("refresh_token", "nope")])
            // Past the client: the refresh token is what fails.
            #expect(Route.json(refresh)["error_description"] == .string("the refresh token is unknown, or its session has ended"))
            let revoke = try await Self.post(client, "/revoke", basic: Self.basic("app"), [("token", "nope")])
            #expect(revoke.status == .ok)
            let device = try await Self.post(client, "/device_authorization", basic: Self.basic("app"), [("scope", "openid")])
            #expect(device.status == .ok && Route.json(device)["device_code"] != nil)
        }
    }

    @Test func twoDifferentClientIDsAreRefusedAndAnUnknownBasicClientIsChallenged() async throws {
        let fixture = Route.Fixture { configuration in configuration.apps[0].deviceGrant = AppSettings.DeviceGrant() }
        try await fixture.test { client in
            for (uri, fields) in [
                ("/token", [("grant_type", "refresh_token"), ("refresh_token", "nope")]), ("/revoke", [("token", "nope")]), ("/device_authorization", []),
            ] {
                let twoIDs = try await Self.post(client, uri, basic: Self.basic("app"), fields + [("client_id", "other")])
                #expect(twoIDs.status == .badRequest && Route.json(twoIDs)["error"] == .string("invalid_request"), "\(uri)")
                let unknown = try await Self.post(client, uri, basic: Self.basic("other"), fields)
                #expect(unknown.status == .unauthorized && Route.json(unknown)["error"] == .string("invalid_client"), "\(uri)")
                #expect(unknown.headers[.wwwAuthenticate] == #"Basic realm="relais""#, "\(uri)")
                let secret = try await Self.post(client, uri, basic: Self.basic("app", "secret"), fields)
                #expect(secret.status == .unauthorized && Route.json(secret)["error"] == .string("invalid_client"), "\(uri)")
            }
        }
    }
}
