import Hummingbird
import NIOCore
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Synchronization
import Testing

/// Fetches over the real libcurl client, as the relay does.
struct CurlKeySetFetcher: JWKSFetcher {
    struct Failed: Error { let status: Int }
    let client: HTTPClient

    func fetchKeySet(from url: String) async throws -> [UInt8] {
        let response = try await client.send(.init(url: url))
        guard (200..<300).contains(response.status) else { throw Failed(status: response.status) }
        return response.body
    }
}

/// What the loopback "provider" serves at /jwks, and how often it was asked.
final class KeySetEndpoint: Sendable {
    private struct State {
        var document: [UInt8]
        var status = 200
        var requests = 0
        var delay: Duration = .zero
    }
    private let state: Mutex<State>

    init(keys: [JWK]) { state = Mutex(State(document: JWKSet(keys: keys).publicJSON())) }

    var requests: Int { state.withLock { $0.requests } }
    func publish(_ keys: [JWK]) { state.withLock { $0.document = JWKSet(keys: keys).publicJSON() } }
    func fail(with status: Int) { state.withLock { $0.status = status } }
    func slow(_ delay: Duration) { state.withLock { $0.delay = delay } }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/jwks") { _, _ in
            let (document, status, delay) = self.state.withLock { state in
                state.requests += 1
                return (state.document, state.status, state.delay)
            }
            if delay > .zero { try await Task.sleep(for: delay) }
            return Response(
                status: .init(code: status),
                headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: document))
            )
        }
        return router
    }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let current = Mutex(ContinuousClock.now)
    var now: ContinuousClock.Instant { current.withLock { $0 } }
    func advance(_ duration: Duration) { current.withLock { $0 += duration } }
}

@Suite struct JWKSCacheTests {
    static let keyA = try! JWK(object: Vectors.named("ES256").private_jwk)
    static let keyB: JWK = {
        var object = Vectors.named("ES384").private_jwk
        object["kid"] = .string("rotated-in")
        return try! JWK(object: object)
    }()

    private func withProvider(
        _ endpoint: KeySetEndpoint,
        _ body: @Sendable (JWKSCache, ManualClock) async throws -> Void
    ) async throws {
        try await LoopbackHTTPServer.with(router: endpoint.router()) { server in
            let client = HTTPClient(configuration: .init(maxConcurrentRequests: 2))
            let clock = ManualClock()
            let cache = JWKSCache(
                url: server.baseURL + "/jwks",
                fetcher: CurlKeySetFetcher(client: client),
                maxAge: .seconds(600),
                minimumRefetchInterval: .seconds(60),
                clock: { clock.now }
            )
            do {
                try await body(cache, clock)
                try await client.shutdown()
            } catch {
                try await client.shutdown()
                throw error
            }
        }
    }

    private func token(signedBy key: JWK, _ algorithm: JWSAlgorithm) throws -> JWS {
        try JWS.parse(JWS.sign(payload: Array(#"{"sub":"x"}"#.utf8), with: key, algorithm: algorithm))
    }

    @Test func theSetIsFetchedOnceAndServedFromMemory() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.keyA])
        try await withProvider(endpoint) { cache, clock in
            let jws = try token(signedBy: Self.keyA, .es256)
            for _ in 0..<20 { try await cache.verify(jws) }
            #expect(endpoint.requests == 1)
            clock.advance(.seconds(601))  // past max age
            try await cache.verify(jws)
            #expect(endpoint.requests == 2)
        }
    }

    @Test func anUnknownKidTriggersOneRefetchAndARotatedKeyIsAccepted() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.keyA])
        try await withProvider(endpoint) { cache, clock in
            try await cache.verify(try token(signedBy: Self.keyA, .es256))
            endpoint.publish([Self.keyA, Self.keyB])  // the provider rotates
            clock.advance(.seconds(61))
            let rotated = try token(signedBy: Self.keyB, .es384)
            let used = try await cache.verify(rotated)
            #expect(used.keyID == "rotated-in")
            #expect(endpoint.requests == 2)
        }
    }

    /// A rotation a second after the set was fetched: the new kid is fetched at once, because only
    /// unknown-kid refetches count against the interval.
    @Test func aRotationRightAfterAFetchIsFollowed() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.keyA])
        try await withProvider(endpoint) { cache, clock in
            try await cache.verify(try token(signedBy: Self.keyA, .es256))
            endpoint.publish([Self.keyA, Self.keyB])
            clock.advance(.seconds(1))
            let used = try await cache.verify(try token(signedBy: Self.keyB, .es384))
            #expect(used.keyID == "rotated-in")
            #expect(endpoint.requests == 2)
        }
    }

    @Test func anUnknownKidThatNeverAppearsIsRejectedAndRefetchesAreThrottled() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.keyA])
        try await withProvider(endpoint) { cache, clock in
            try await cache.verify(try token(signedBy: Self.keyA, .es256))
            let stranger = try token(signedBy: Self.keyB, .es384)
            for _ in 0..<10 {
                await #expect(throws: JOSEError.noMatchingKey(reason: "no ES384 key with kid 'rotated-in'")) { try await cache.verify(stranger) }
            }
            #expect(endpoint.requests == 2)  // the first unknown kid refetched once, the others waited
            clock.advance(.seconds(61))
            for _ in 0..<10 {
                await #expect(throws: JOSEError.self) { try await cache.verify(stranger) }
            }
            #expect(endpoint.requests == 3)  // one refetch per interval
        }
    }

    @Test func concurrentCallersShareOneFetch() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.keyA])
        endpoint.slow(.milliseconds(300))
        try await withProvider(endpoint) { cache, _ in
            let jws = try token(signedBy: Self.keyA, .es256)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<16 { group.addTask { try await cache.verify(jws) } }
                try await group.waitForAll()
            }
            #expect(endpoint.requests == 1)
        }
    }

    @Test func theLastGoodSetKeepsServingWhenARefetchFails() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.keyA])
        try await withProvider(endpoint) { cache, clock in
            let jws = try token(signedBy: Self.keyA, .es256)
            try await cache.verify(jws)
            endpoint.fail(with: 503)
            clock.advance(.seconds(601))
            try await cache.verify(jws)  // stale but still trusted
            #expect(endpoint.requests == 2)
        }
    }

    @Test func noSetAndNoProviderIsUnavailable() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.keyA])
        endpoint.fail(with: 500)
        try await withProvider(endpoint) { cache, _ in
            await #expect { try await cache.verify(try token(signedBy: Self.keyA, .es256)) } throws: { error in
                (error as? JOSEError)?.code == "jose_jwks_unavailable"
            }
        }
    }

    /// Before any set was fetched, a failing provider is asked once per `minimumRefetchInterval`,
    /// not once per caller: forged tokens for it cost no request each, and callers fail at once.
    @Test func aFailingFirstFetchIsRetriedOncePerInterval() async throws {
        final class CountingFetcher: JWKSFetcher {
            struct Down: Error {}
            let state = Mutex((fetches: 0, document: [UInt8]?.none))
            func fetchKeySet(from url: String) async throws -> [UInt8] {
                let document = state.withLock { state in
                    state.fetches += 1
                    return state.document
                }
                guard let document else { throw Down() }
                return document
            }
        }
        let fetcher = CountingFetcher()
        let clock = ManualClock()
        let cache = JWKSCache(url: "https://provider.example/jwks", fetcher: fetcher, minimumRefetchInterval: .seconds(60), clock: { clock.now })
        let jws = try token(signedBy: Self.keyA, .es256)
        for _ in 0..<20 {
            await #expect { try await cache.verify(jws) } throws: { error in (error as? JOSEError)?.code == "jose_jwks_unavailable" }
        }
        #expect(fetcher.state.withLock { $0.fetches } == 1)
        clock.advance(.seconds(61))
        for _ in 0..<20 { await #expect(throws: JOSEError.self) { try await cache.currentSet() } }
        #expect(fetcher.state.withLock { $0.fetches } == 2)
        fetcher.state.withLock { $0.document = JWKSet(keys: [Self.keyA]).publicJSON() }  // the provider is back
        clock.advance(.seconds(61))
        try await cache.verify(jws)
        #expect(fetcher.state.withLock { $0.fetches } == 3)
    }
}
