import RelaisClock
import RelaisConfig
import RelaisJOSE
import Testing

@testable import RelaisOIDC

private func invalid(_ check: String) -> Expected { .refused("provider_invalid_response", check: check) }

extension Case {
    /// The discovery document (or the configured endpoints) read the first time.
    static let discoveryDocuments: [Case] = [
        Case("the document", .accepted) { _ in },
        Case("issuer other", invalid("names issuer 'https://elsewhere.example'")) { $0.discovery["issuer"] = .string("https://elsewhere.example") },
        Case("issuer with a trailing slash", invalid("names issuer")) { $0.discovery["issuer"] = .string($0.issuer + "/") },
        Case("issuer missing", invalid("names issuer '(none)'")) { $0.discovery["issuer"] = nil },
        Case("token_endpoint missing", invalid("lacks")) { $0.discovery["token_endpoint"] = nil },
        Case("authorization_endpoint missing", invalid("lacks")) { $0.discovery["authorization_endpoint"] = nil },
        Case("token_endpoint missing but configured", .accepted) {
            $0.discovery["token_endpoint"] = nil
            $0.settings.tokenEndpoint = $0.issuer + "/configured-token"
        },
        Case("configured endpoints win over the document", .accepted) {
            $0.settings.tokenEndpoint = $0.issuer + "/configured-token"
            $0.settings.jwksURI = $0.issuer + "/configured-jwks"
        },
        Case("HTTP 404", invalid("HTTP 404")) { $0.discoveryStatus = 404 },
        Case("HTTP 503", .refused("provider_unavailable", check: "HTTP 503")) { $0.discoveryStatus = 503 },
        Case("HTTP 429", .refused("provider_unavailable", check: "HTTP 429")) { $0.discoveryStatus = 429 },
        Case("unreachable", .refused("provider_unavailable", check: "http_connection_refused")) {
            // Port 1 on loopback: nothing listens there, the connection is refused at once.
            $0.settings = ProviderSettings(id: "down", preset: .oidc, issuer: "http://127.0.0.1:1/api/v2", clientID: TestKeys.clientID)
        },
        Case("discovery off, endpoints configured", .accepted) {
            $0.settings.discovery = false
            $0.settings.authorizationEndpoint = $0.issuer + "/authorize"
            $0.settings.tokenEndpoint = $0.issuer + "/configured-token"
            $0.settings.jwksURI = $0.issuer + "/configured-jwks"
        },
        Case("discovery off, no endpoints", invalid("no endpoints configured")) { $0.settings.discovery = false },
    ]
}

@Suite struct DiscoveryTests {
    /// An https issuer's document names https endpoints only: one in clear would carry the client
    /// secret, the code and the tokens unencrypted. An http issuer (a local development provider)
    /// keeps its own.
    @Test func anHTTPSIssuersDocumentNamesHTTPSEndpointsOnly() throws {
        let names = ["authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri", "end_session_endpoint"]
        for issuer in ["https://op.example", "http://127.0.0.1:9000"] {
            let settings = ProviderSettings(id: "op", preset: .oidc, issuer: issuer, clientID: "c")
            var document: [String: JSONValue] = ["issuer": .string(issuer)]
            for name in names { document[name] = .string(issuer + "/" + name) }
            #expect((try? ProviderMetadata(discovery: document, settings: settings)) != nil, "\(issuer)")
            for name in names {
                var clear = document
                clear[name] = .string("http://op.example/" + name)
                if issuer.hasPrefix("https") {
                    #expect(throws: UpstreamError.self, "\(name)") { try ProviderMetadata(discovery: clear, settings: settings) }
                } else {
                    #expect((try? ProviderMetadata(discovery: clear, settings: settings)) != nil, "\(name)")
                }
            }
        }
    }

    @Test("discovery documents", arguments: Case.discoveryDocuments)
    func discovery(_ row: Case) async throws {
        try await Harness.run(row.setup) { harness in
            let settings = harness.scenario.settings
            guard let metadata = await row.expected.verify({ () async throws(UpstreamError) in try await harness.provider.metadata() }) else { return }
            let issuer = harness.scenario.issuer
            #expect(metadata.issuer == issuer)
            #expect(metadata.authorizationEndpoint == issuer + "/authorize")
            #expect(metadata.tokenEndpoint == settings.tokenEndpoint ?? issuer + "/token")
            #expect(metadata.jwksURI == settings.jwksURI ?? issuer + "/jwks")
            #expect(metadata.userinfoEndpoint == (settings.discovery ? issuer + "/userinfo" : nil))
            #expect(harness.double.hits(.discovery) == (settings.discovery ? 1 : 0))
        }
    }

    /// A body that is not JSON at all (the table's bodies are all JSON objects).
    @Test func aDiscoveryBodyThatIsNotJSONIsRefused() async throws {
        try await Harness.run { harness in
            harness.double.reply(.discovery, .init(body: Array("<html>".utf8), contentType: "text/html"))
            await invalid("not a JSON object").verify { () async throws(UpstreamError) in try await harness.provider.metadata() }
        }
    }

    @Test func theDocumentIsReadOnceAnHour() async throws {
        try await Harness.run { harness in
            let first = try await harness.provider.metadata()
            harness.clock.advance(by: .seconds(3599))
            #expect(try await harness.provider.metadata() == first)
            #expect(harness.double.hits(.discovery) == 1)
            harness.double.reply(
                .discovery,
                .init(
                    body: JSONValue.object(
                        harness.scenario.discovery.merging([
                            "token_endpoint": .string(harness.scenario.issuer + "/rotated-token")
                        ]) { $1 }
                    ).serialized()))
            harness.clock.advance(by: .seconds(2))
            #expect(try await harness.provider.metadata().tokenEndpoint == harness.scenario.issuer + "/rotated-token")
            #expect(harness.double.hits(.discovery) == 2)
        }
    }

    /// Before any document was read, a failing discovery is asked once per pause, not once per
    /// caller: the callers in between get the same failure at once.
    @Test func aFailingFirstDiscoveryIsRetriedOncePerPause() async throws {
        try await Harness.run { harness in
            harness.double.reply(.discovery, .init(status: 503))
            for _ in 0..<10 { await #expect(throws: UpstreamError.self) { try await harness.provider.metadata() } }
            #expect(harness.double.hits(.discovery) == 1)
            harness.clock.advance(by: .seconds(31))
            harness.double.reply(.discovery, .init(body: JSONValue.object(harness.scenario.discovery).serialized()))
            _ = try await harness.provider.metadata()
            #expect(harness.double.hits(.discovery) == 2)
        }
    }

    /// What the provider answers when the cached document is due for a refresh.
    struct RefreshFailure: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let reply: ProviderDouble.Reply
    }

    static let failedRefreshes = [
        RefreshFailure(testDescription: "HTTP 500", reply: .init(status: 500)),
        RefreshFailure(testDescription: "HTTP 404", reply: .init(status: 404)),
        RefreshFailure(testDescription: "not JSON", reply: .init(body: Array("<html>".utf8), contentType: "text/html")),
        RefreshFailure(
            testDescription: "issuer other",
            reply: .init(
                body: JSONValue.object([
                    "issuer": .string("https://elsewhere.example"), "authorization_endpoint": .string("x"), "token_endpoint": .string("x"),
                ]).serialized())),
    ]

    @Test("the last good document is kept when a refresh fails", arguments: failedRefreshes)
    func lastGoodDocumentKept(_ failure: RefreshFailure) async throws {
        try await Harness.run { harness in
            let first = try await harness.provider.metadata()
            harness.double.reply(.discovery, failure.reply)
            harness.clock.advance(by: .seconds(3601))
            #expect(try await harness.provider.metadata() == first)
            #expect(harness.double.hits(.discovery) == 2)
            // And sign-ins keep starting from it, without asking again at each one.
            let url = try await harness.provider.authorizationURL(
                redirectURI: "https://relais.example/callback", state: "state-1", nonce: "nonce-1", acr: nil, prompt: nil, codeChallenge: nil
            )
            #expect(url.hasPrefix(harness.scenario.issuer + "/authorize?"))
            #expect(harness.double.hits(.discovery) == 2)
            // Until the retry delay has passed.
            harness.clock.advance(by: UpstreamProvider.retryAfterFailedRefresh)
            #expect(try await harness.provider.metadata() == first)
            #expect(harness.double.hits(.discovery) == 3)
        }
    }

    /// Sign-ins that start together while no document is held wait for one request, not one each.
    @Test func concurrentCallsShareOneDiscoveryRequest() async throws {
        try await Harness.run { harness in
            let provider = harness.provider
            let documents = try await withThrowingTaskGroup(of: ProviderMetadata.self) { group in
                for _ in 0..<10 { group.addTask { try await provider.metadata() } }
                return try await group.reduce(into: [ProviderMetadata]()) { $0.append($1) }
            }
            #expect(documents.count == 10 && Set(documents.map(\.tokenEndpoint)).count == 1)
            #expect(harness.double.hits(.discovery) == 1)
        }
    }

    /// RFC 9207: with `auto`, a callback without `iss` is refused exactly when discovery says the
    /// provider sends it; `always` and `never` do not ask.
    @Test(
        arguments: [
            (ProviderSettings.CallbackIssuer.auto, true, true), (.auto, false, false), (.auto, nil, false),
            (.always, false, true), (.always, nil, true), (.never, true, false),
        ] as [(ProviderSettings.CallbackIssuer, Bool?, Bool)])
    func theCallbackIssuerFollowsDiscovery(policy: ProviderSettings.CallbackIssuer, advertised: Bool?, required: Bool) async throws {
        try await Harness.run({ scenario in
            scenario.settings.requireCallbackIssuer = policy
            if let advertised { scenario.discovery["authorization_response_iss_parameter_supported"] = .bool(advertised) }
        }) { harness in
            #expect(await harness.provider.requiresCallbackIssuer() == required)
        }
    }

    /// A provider whose discovery cannot be read now is taken to send `iss` (fail closed).
    @Test func anUnreadableDiscoveryRequiresTheCallbackIssuer() async throws {
        try await Harness.run({ $0.discoveryStatus = 500 }) { harness in
            #expect(await harness.provider.requiresCallbackIssuer())
        }
    }
}
