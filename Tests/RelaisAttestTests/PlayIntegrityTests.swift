import Foundation
import Hummingbird
import RelaisAttest
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

/// Play Integrity verdicts built as Google builds them (a JWS by the verification key, encrypted
/// to the app's AES key), each check wrong in turn; and the decode service, played by a local
/// stand-in that answers as Google's does.
@Suite struct PlayIntegrityTests {
    static let package = PlayIntegrityFactory.package
    static let digest = PlayIntegrityFactory.digest
    static let now = 1_795_000_000.0

    let factory: PlayIntegrityFactory
    let decoder: PlayIntegrityLocalDecoder
    let expected = PlayIntegrityVerifier.requestHash(challenge: "challenge-1", thumbprint: "jkt-1")
    var aesKey: [UInt8] { factory.aesKey }

    init() throws {
        factory = try PlayIntegrityFactory()
        decoder = try PlayIntegrityLocalDecoder(decryptionKey: factory.decryptionKey, verificationKey: factory.verificationKey)
    }

    static func payload(_ change: (inout [String: JSONValue]) -> Void = { _ in }) -> [String: JSONValue] {
        PlayIntegrityFactory.payload(hash: PlayIntegrityVerifier.requestHash(challenge: "challenge-1", thumbprint: "jkt-1"), now: now, change)
    }

    func token(_ payload: [String: JSONValue], signer: JWK? = nil, aesKey: [UInt8]? = nil) throws -> String {
        try factory.token(payload, signer: signer, aesKey: aesKey)
    }

    func verifier(_ configure: (inout PlayIntegrityPolicy) -> Void = { _ in }) -> PlayIntegrityVerifier {
        var policy = PlayIntegrityPolicy(packageName: Self.package, certificateDigests: [Self.digest])
        configure(&policy)
        return PlayIntegrityVerifier(policy: policy, decoder: decoder)
    }

    func refusal(_ token: String, _ verifier: PlayIntegrityVerifier? = nil, expected: String? = nil) async -> AttestationError.Code? {
        do {
            _ = try await (verifier ?? self.verifier()).verify(token, expectedHash: expected ?? self.expected, now: Self.now)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func aGenuineVerdictPasses() async throws {
        let verdict = try await verifier().verify(try token(Self.payload()), expectedHash: expected, now: Self.now)
        #expect(verdict.deviceVerdicts == ["MEETS_DEVICE_INTEGRITY"])
        #expect(verdict.versionCode == "42")
        #expect(verdict.licensing == "LICENSED")
    }

    @Test func eachCheckRefusesItsOwnDefect() async throws {
        #expect(await refusal("not.a.jwe") == .playMalformed)
        #expect(await refusal(try token(Self.payload(), aesKey: SecureRandom.bytes(32))) == .playDecryption)
        #expect(await refusal(try token(Self.payload(), signer: try JWK.generate(for: .es256))) == .playSignature)
        #expect(await refusal(try token(Self.payload { $0["deviceIntegrity"] = nil })) == .playMalformed)
        #expect(await refusal(try token(Self.payload { $0["requestDetails"]?.set("requestPackageName", .string("fr.evil.app")) })) == .playPackage)
        #expect(await refusal(try token(Self.payload { $0["appIntegrity"]?.set("packageName", .string("fr.evil.app")) })) == .playPackage)
        #expect(await refusal(try token(Self.payload()), expected: PlayIntegrityVerifier.requestHash(challenge: "challenge-2", thumbprint: "jkt-1")) == .playNonce)
        #expect(await refusal(try token(Self.payload()), expected: PlayIntegrityVerifier.requestHash(challenge: "challenge-1", thumbprint: "jkt-2")) == .playNonce)
        let old = String(Int(Self.now * 1000) - 301_000)
        #expect(await refusal(try token(Self.payload { $0["requestDetails"]?.set("timestampMillis", .string(old)) })) == .playStale)
        let future = String(Int(Self.now * 1000) + 120_000)
        #expect(await refusal(try token(Self.payload { $0["requestDetails"]?.set("timestampMillis", .string(future)) })) == .playStale)
        for verdict in ["UNRECOGNIZED_VERSION", "UNEVALUATED"] {
            #expect(await refusal(try token(Self.payload { $0["appIntegrity"]?.set("appRecognitionVerdict", .string(verdict)) })) == .playAppUnrecognized)
        }
        #expect(await refusal(try token(Self.payload { $0["appIntegrity"]?.set("certificateSha256Digest", .array([.string("AAAA")])) })) == .playCertificate)
        #expect(await refusal(try token(Self.payload { $0["deviceIntegrity"]?.set("deviceRecognitionVerdict", .array([.string("MEETS_BASIC_INTEGRITY")])) })) == .playDevice)
        #expect(await refusal(try token(Self.payload { $0["deviceIntegrity"]?.set("deviceRecognitionVerdict", .array([])) })) == .playDevice)
    }

    @Test func theDeviceLevelIsConfigurable() async throws {
        let basic = try token(Self.payload { $0["deviceIntegrity"]?.set("deviceRecognitionVerdict", .array([.string("MEETS_BASIC_INTEGRITY")])) })
        #expect(await refusal(basic, verifier { $0.deviceIntegrity = .basic }) == nil)
        #expect(await refusal(try token(Self.payload()), verifier { $0.deviceIntegrity = .strong }) == .playDevice)
        let strong = try token(Self.payload { $0["deviceIntegrity"]?.set("deviceRecognitionVerdict", .array([.string("MEETS_STRONG_INTEGRITY")])) })
        #expect(await refusal(strong, verifier { $0.deviceIntegrity = .strong }) == nil)
    }

    @Test func digestsAreReadInThePlayConsoleSpellingsToo() async throws {
        let bytes = RelaisCrypto.SHA256.hash(Array("signing certificate".utf8))
        let colons = bytes.map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(PlayIntegrityPolicy.normalizedDigest(colons) == Self.digest)
        #expect(PlayIntegrityPolicy.normalizedDigest(Base64.encode(bytes)) == Self.digest)
        #expect(PlayIntegrityPolicy.normalizedDigest("not a digest") == nil)
        #expect(await refusal(try token(Self.payload()), verifier { $0.certificateDigests = [colons] }) == nil)
    }

    @Test func consoleKeysInTheWrongShapeAreRefusedUpFront() throws {
        #expect(throws: AttestationError.self) { _ = try PlayIntegrityLocalDecoder(decryptionKey: Base64.encode([1, 2, 3]), verificationKey: "AAAA") }
        let rsa = try TestKeys.rsa()
        let spki = try #require(rsa.publicKeyPEM()).split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        #expect(throws: AttestationError.self) { _ = try PlayIntegrityLocalDecoder(decryptionKey: Base64.encode(aesKey), verificationKey: spki) }
    }

    // MARK: Google's decode service (standard requests), played locally

    /// Answers as oauth2.googleapis.com/token and playintegrity.googleapis.com do: a JWT-bearer
    /// grant signed by the service account's key, then decodeIntegrityToken with that token.
    static func standIn(serviceKey: JWK, payload: [String: JSONValue], calls: Counter) -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/token") { request, _ -> Response in
            calls.increment("token")
            let body = try await request.body.collect(upTo: 16384)
            let form = FormParameters(encoded: String(buffer: body))
            guard form?["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = form?["assertion"],
                let jws = try? JWS.parse(assertion), (try? jws.verify(with: serviceKey)) != nil,
                let claims = JSONValue.object(from: jws.payload), claims["scope"]?.stringValue == "https://www.googleapis.com/auth/playintegrity"
            else { return Response(status: .badRequest) }
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: #"{"access_token":"ya29.test","expires_in":3599,"token_type":"Bearer"}"#)))
        }
        router.post("/v1/:call") { request, context -> Response in
            calls.increment("decode")
            guard context.parameters.get("call") == "\(package):decodeIntegrityToken", request.headers[.authorization] == "Bearer ya29.test" else {
                return Response(status: .forbidden)
            }
            let body = try await request.body.collect(upTo: 65536)
            guard JSONValue.object(from: Array(buffer: body))?["integrity_token"]?.stringValue == "standard-token" else { return Response(status: .badRequest) }
            let answer = JSONValue.object(["tokenPayloadExternal": .object(payload)]).serialized()
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(bytes: answer)))
        }
        return router
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [String: Int] = [:]
        func increment(_ name: String) { lock.withLock { counts[name, default: 0] += 1 } }
        func count(_ name: String) -> Int { lock.withLock { counts[name, default: 0] } }
    }

    static func serviceAccount(_ key: JWK, tokenURI: String) throws -> [UInt8] {
        JSONValue.object([
            "type": .string("service_account"), "client_email": .string("relais@example.iam.gserviceaccount.com"),
            "private_key": .string(try #require(key.privateKeyPEM())), "private_key_id": .string("k1"), "token_uri": .string(tokenURI),
        ]).serialized()
    }

    @Test func standardRequestsAreDecodedByTheServiceWithOneAccessToken() async throws {
        let serviceKey = try TestKeys.rsa(0, keyID: "k1")
        let calls = Counter()
        var payload = Self.payload()
        payload["requestDetails"] = .object([
            "requestPackageName": .string(Self.package), "requestHash": .string(expected), "timestampMillis": .string(String(Int(Self.now * 1000))),
        ])
        try await LoopbackHTTPServer.with(router: Self.standIn(serviceKey: serviceKey, payload: payload, calls: calls)) { server in
            let http = HTTPClient()
            // 20 s, not the 5 s default: this test is about the calls, not their timeout (which has
            // its own test), and a full run's first seconds once took the token call past 5 s.
            let google = try PlayIntegrityGoogleDecoder(
                serviceAccount: try Self.serviceAccount(serviceKey, tokenURI: server.baseURL + "/token"), http: http, apiBaseURL: server.baseURL,
                timeout: .seconds(20), now: { Self.now }
            )
            let verifier = PlayIntegrityVerifier(policy: PlayIntegrityPolicy(packageName: Self.package, certificateDigests: [Self.digest]), decoder: google)
            for _ in 0..<2 { _ = try await verifier.verify("standard-token", expectedHash: expected, now: Self.now) }
            #expect(calls.count("token") == 1, "the access token is reused")
            #expect(calls.count("decode") == 2)
            do {
                _ = try await verifier.verify("another-token", expectedHash: expected, now: Self.now)
                Issue.record("a token the service refuses was accepted")
            } catch let error as AttestationError {
                #expect(error.code == .playDecodeService)
            }
            try await http.shutdown()
        }
    }

    /// A Google endpoint that accepts the connection and then does not answer: the call is cut at
    /// the decoder's timeout, as a hung service must not hold a sign-in. The proof is the cause the
    /// failure names (libcurl's timeout), not the wall clock: under a full parallel run the test's
    /// continuation may wait seconds for a free thread after the cut (seen: 10.7 s for a 2 s cut).
    /// Without the timeout the call would never end, which the time limit turns into a failure.
    @Test(.timeLimit(.minutes(1))) func aServiceThatHangsIsCutAtTheTimeout() async throws {
        let serviceKey = try TestKeys.rsa(0, keyID: "k1")
        let hung = try SilentListener()
        let http = HTTPClient()
        let google = try PlayIntegrityGoogleDecoder(
            serviceAccount: try Self.serviceAccount(serviceKey, tokenURI: hung.baseURL + "/token"), http: http, apiBaseURL: hung.baseURL,
            timeout: .milliseconds(500), now: { Self.now }
        )
        let outcome: Result<[String: JSONValue], AttestationError> = await Result(catching: { () async throws(AttestationError) in
            try await google.decode("standard-token", packageName: Self.package)
        })
        #expect(outcome.failureCode == .playDecodeService)
        guard case .failure(let failure) = outcome else { return }
        #expect(failure.reason.contains(HTTPClientError.timeout.code), "cut by the timeout, not refused: \(failure.reason)")
        try await http.shutdown()
        #expect(hung.port > 0)  // the listener stays open until here
    }

    @Test func anUnreachableServiceOrAForeignKeyIsADecodeServiceError() async throws {
        let serviceKey = try TestKeys.rsa(0, keyID: "k1")
        let http = HTTPClient()
        // A port nothing listens on: the call fails fast and names the service.
        let closed = try PlayIntegrityGoogleDecoder(
            serviceAccount: try Self.serviceAccount(serviceKey, tokenURI: "http://127.0.0.1:9/token"), http: http, apiBaseURL: "http://127.0.0.1:9",
            timeout: .seconds(2), now: { Self.now }
        )
        await #expect(throws: AttestationError.self) { _ = try await closed.decode("t", packageName: Self.package) }
        #expect(throws: AttestationError.self) {
            _ = try PlayIntegrityGoogleDecoder(serviceAccount: Array(#"{"client_email":"a"}"#.utf8), http: http, now: { Self.now })
        }
        let calls = Counter()
        // A key of its own: another slot of the test pool than the service's.
        let stranger = try TestKeys.rsa(1, keyID: "k2")
        try await LoopbackHTTPServer.with(router: Self.standIn(serviceKey: serviceKey, payload: Self.payload(), calls: calls)) { server in
            let google = try PlayIntegrityGoogleDecoder(
                serviceAccount: try Self.serviceAccount(stranger, tokenURI: server.baseURL + "/token"), http: http, apiBaseURL: server.baseURL,
                now: { Self.now }
            )
            do {
                _ = try await google.decode("standard-token", packageName: Self.package)
                Issue.record("a service account the stand-in does not know got a token")
            } catch let error as AttestationError {
                #expect(error.code == .playDecodeService)
            }
            #expect(calls.count("decode") == 0)
        }
        try await http.shutdown()
    }
}

extension Result where Failure == AttestationError {
    init(catching body: () async throws(AttestationError) -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }

    var failureCode: AttestationError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
