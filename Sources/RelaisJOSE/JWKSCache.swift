/// Fetches a JWKS document for a ``JWKSCache``.
///
/// RelaisJOSE has no HTTP client of its own, so that it imposes none: Relais plugs in its libcurl
/// client, an API plugs in whatever HTTP stack it already uses (URLSession, AsyncHTTPClient…).
/// See <doc:VerifyingRelaisAccessTokens> for a URLSession sketch.
public protocol JWKSFetcher: Sendable {
    /// Returns the body of a successful (2xx) response, or throws.
    ///
    /// Throw on any other status rather than returning the body: the cache then keeps serving the
    /// last good set. Use a short timeout; callers wait for the fetch when no set is held yet.
    func fetchKeySet(from url: String) async throws -> [UInt8]
}

/// A provider's key set, kept fresh the way key rotation needs:
///
/// - served from memory while younger than `maxAge`, refetched after;
/// - refetched at once when a token names an unknown `kid` (a rotation), however recent the last
///   scheduled fetch, but at most one such refetch per `minimumRefetchInterval`, so garbage `kid`s
///   cannot turn Relais into a request amplifier;
/// - concurrent callers share one fetch;
/// - when a refetch fails, the last good set keeps serving;
/// - while no set was ever fetched, a failed fetch is retried at most once per
///   `minimumRefetchInterval`: callers in between fail at once with
///   ``JOSEError/keySetUnavailable(reason:)``, so a provider that is down, or tokens forged for
///   it, cost no request each.
///
/// Create one cache per key set and keep it for the life of the process (not one per request):
/// it is the cache that makes offline verification cost no network round trip.
public actor JWKSCache {
    /// The JWKS address, as given at creation (for Relais, `{issuer}/jwks.json`).
    public let url: String
    private let fetcher: any JWKSFetcher
    private let maxAge: Duration
    private let minimumRefetchInterval: Duration
    private let clock: @Sendable () -> ContinuousClock.Instant

    private var keySet: JWKSet?
    private var fetchedAt: ContinuousClock.Instant?
    private var lastAttempt: ContinuousClock.Instant?
    /// The last refetch caused by an unknown `kid`: only those throttle the next one, so a first or
    /// scheduled fetch a second before a rotation does not block it.
    private var lastUnknownKeyRefetch: ContinuousClock.Instant?
    private var inFlight: Task<JWKSet, any Error>?

    /// Creates an empty cache; nothing is fetched until the first key is asked for.
    ///
    /// - Parameters:
    ///   - url: Where the JWK Set is published, passed as is to `fetcher`.
    ///   - fetcher: How to download it.
    ///   - maxAge: How long a fetched set is served before it is fetched again.
    ///   - minimumRefetchInterval: The shortest time between two fetches caused by unknown `kid`s
    ///     (and between retries of a failing fetch, the first one included); a token naming an
    ///     unknown `kid` within it of the last such fetch is refused with
    ///     ``JOSEError/noMatchingKey(reason:)`` without a fetch.
    ///   - clock: The current instant; injectable so tests can move time by hand.
    public init(
        url: String,
        fetcher: any JWKSFetcher,
        maxAge: Duration = .seconds(3600),
        minimumRefetchInterval: Duration = .seconds(60),
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.url = url
        self.fetcher = fetcher
        self.maxAge = maxAge
        self.minimumRefetchInterval = minimumRefetchInterval
        self.clock = clock
    }

    /// Selects the key for a token, refreshing the set when it is stale or the `kid` is unknown.
    ///
    /// - Throws: ``JOSEError/noMatchingKey(reason:)`` (see ``JWKSet/key(for:keyID:)``), or
    ///   ``JOSEError/keySetUnavailable(reason:)`` when no set could ever be fetched (without a
    ///   request when the last attempt failed within `minimumRefetchInterval`).
    public func key(for algorithm: JWSAlgorithm, keyID: String?) async throws(JOSEError) -> JWK {
        let now = clock()
        if keySet == nil || fetchedAt.map({ now - $0 >= maxAge }) ?? true {
            try await refresh(force: false)
        }
        guard let current = keySet else { throw unavailable }
        do {
            return try current.key(for: algorithm, keyID: keyID)
        } catch {
            // Only an unknown kid suggests a rotation; an ambiguous or unsuitable set would not change.
            guard keyID != nil, case .noMatchingKey = error else { throw error }
            let now = clock()
            if let last = lastUnknownKeyRefetch, now - last < minimumRefetchInterval { throw error }
            lastUnknownKeyRefetch = now
            try await refresh(force: true)
            guard let refreshed = keySet else { throw error }
            return try refreshed.key(for: algorithm, keyID: keyID)
        }
    }

    /// The whole current set, fetched first when none is held or it is older than `maxAge`: for
    /// choosing a key by something other than a token's `kid` (an encryption key, for instance).
    public func currentSet() async throws(JOSEError) -> JWKSet {
        let now = clock()
        if keySet == nil || fetchedAt.map({ now - $0 >= maxAge }) ?? true {
            try await refresh(force: false)
        }
        guard let current = keySet else { throw unavailable }
        return current
    }

    /// Verifies `jws` with the key the cache selects for its `alg` and `kid`, and returns that key.
    ///
    /// This checks the signature only: pass the token to ``ClaimsPolicy/validate(_:)`` next.
    /// - Throws: the errors of ``key(for:keyID:)`` and of ``JWS/verify(with:)-(JWK)``.
    @discardableResult
    public func verify(_ jws: JWS) async throws(JOSEError) -> JWK {
        let key = try await key(for: jws.algorithm, keyID: jws.keyID)
        try jws.verify(with: key)
        return key
    }

    /// Why no set is held: the last fetch failed within `minimumRefetchInterval`.
    private var unavailable: JOSEError {
        .keySetUnavailable(reason: "no key set fetched from \(url): the last attempt failed less than \(minimumRefetchInterval) ago")
    }

    /// Fetches unless a fetch was tried within `minimumRefetchInterval` (`force`: the caller has
    /// throttled already), whether or not a set is held: a caller that finds none then fails at
    /// once. A fetch under way is joined. A failed fetch leaves the previous set in place.
    private func refresh(force: Bool) async throws(JOSEError) {
        let now = clock()
        if !force, let lastAttempt, now - lastAttempt < minimumRefetchInterval, inFlight == nil { return }
        let task: Task<JWKSet, any Error>
        if let inFlight {
            task = inFlight
        } else {
            lastAttempt = now
            let fetcher = self.fetcher
            let url = self.url
            task = Task { try JWKSet(json: try await fetcher.fetchKeySet(from: url)) }
            inFlight = task
        }
        do {
            let fetched = try await task.value
            if inFlight == task {
                keySet = fetched
                fetchedAt = clock()
                inFlight = nil
            }
        } catch {
            if inFlight == task { inFlight = nil }
            if keySet == nil {
                throw .keySetUnavailable(reason: "cannot fetch \(url): \(error)")
            }
        }
    }
}
