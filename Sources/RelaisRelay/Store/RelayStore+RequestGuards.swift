import RelaisStore

/// What the guards in front of the flows remember across instances: DPoP proofs already used and
/// rate-limit counts.
extension RelayStore {
    /// True the first time a DPoP proof is seen within `window`, false for a replay.
    func rememberProof(thumbprint: String, tokenID: String, for window: Duration) async throws -> Bool {
        try await store.setIfAbsent(Key.dpopProof(thumbprint: thumbprint, tokenID: tokenID), [1], ttl: window)
    }

    /// Counts one request in fixed window number `index` (shared by every instance); the count so far.
    func countRequest(bucket: String, id: String, window index: Int, length: Duration) async throws -> Int {
        try await store.increment(Key.rateLimit(bucket, id, window: index), window: length)
    }
}
