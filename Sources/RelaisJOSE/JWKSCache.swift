/// Fetches a JWKS document. Relais plugs in its libcurl client; an app API can plug in any HTTP stack.
public protocol JWKSFetcher: Sendable {
    /// Returns the body of a successful (2xx) response, or throws.
    func fetchKeySet(from url: String) async throws -> [UInt8]
}

/// A provider's key set, kept fresh the way key rotation needs:
///
/// - served from memory while younger than `maxAge`, refetched after;
/// - refetched at once when a token names an unknown `kid` (a rotation), but at most once per
///   `minimumRefetchInterval`, so garbage `kid`s cannot turn Relais into a request amplifier;
/// - concurrent callers share one fetch;
/// - when a refetch fails, the last good set keeps serving.
public actor JWKSCache {
    public let url: String
    private let fetcher: any JWKSFetcher
    private let maxAge: Duration
    private let minimumRefetchInterval: Duration
    private let clock: @Sendable () -> ContinuousClock.Instant

    private var keySet: JWKSet?
    private var fetchedAt: ContinuousClock.Instant?
    private var lastAttempt: ContinuousClock.Instant?
    private var inFlight: Task<JWKSet, any Error>?

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
    public func key(for algorithm: JWSAlgorithm, keyID: String?) async throws(JOSEError) -> JWK {
        let now = clock()
        if keySet == nil || fetchedAt.map({ now - $0 >= maxAge }) ?? true {
            try await refresh(force: keySet == nil)
        }
        guard let current = keySet else { throw .keySetUnavailable(reason: "no key set fetched from \(url)") }
        do {
            return try current.key(for: algorithm, keyID: keyID)
        } catch {
            // Only an unknown kid suggests a rotation; an ambiguous or unsuitable set would not change.
            guard keyID != nil, case .noMatchingKey = error else { throw error }
            try await refresh(force: false)
            guard let refreshed = keySet else { throw error }
            return try refreshed.key(for: algorithm, keyID: keyID)
        }
    }

    /// The whole current set, fetched first when none is held or it is older than `maxAge`: for
    /// choosing a key by something other than a token's `kid` (an encryption key, for instance).
    public func currentSet() async throws(JOSEError) -> JWKSet {
        let now = clock()
        if keySet == nil || fetchedAt.map({ now - $0 >= maxAge }) ?? true {
            try await refresh(force: keySet == nil)
        }
        guard let current = keySet else { throw .keySetUnavailable(reason: "no key set fetched from \(url)") }
        return current
    }

    /// Verifies `jws` with the selected key and returns that key.
    @discardableResult
    public func verify(_ jws: JWS) async throws(JOSEError) -> JWK {
        let key = try await key(for: jws.algorithm, keyID: jws.keyID)
        try jws.verify(with: key)
        return key
    }

    /// Fetches unless a fetch happened within `minimumRefetchInterval` (`force` ignores the limit
    /// only while no set is held). A failed fetch leaves the previous set in place.
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
