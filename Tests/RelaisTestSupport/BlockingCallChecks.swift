/// The counters of blocking calls made where they must not be (`HTTPClient.blockingCallsOnEventLoop`,
/// the store's) are process-wide, and tests run in parallel: a test that makes a violation on
/// purpose, to show the check fires, and a test that expects no violation during a whole sign-in
/// each hold this, so that neither sees the other's calls.
public actor BlockingCallChecks {
    public static let shared = BlockingCallChecks()
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public func exclusively<Result: Sendable>(_ body: @Sendable () async throws -> Result) async rethrows -> Result {
        while busy { await withCheckedContinuation { waiting.append($0) } }
        busy = true
        defer {
            busy = false
            if !waiting.isEmpty { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}
