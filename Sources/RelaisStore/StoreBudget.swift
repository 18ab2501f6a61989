/// The time one request may spend waiting on the store, across all its calls.
///
/// The server sets ``deadline`` for each request (`store.request_budget`); ``RedisStore`` refuses a
/// call once it has passed, without queueing it, never waits past it for a free connection, and
/// waits for Redis' reply until then at most (or `command_timeout`, when sooner). A request
/// against a frozen Redis thus waits about one budget instead of one `command_timeout` per call.
public enum StoreBudget {
    @TaskLocal public static var deadline: ContinuousClock.Instant?

    /// Runs `body` with a budget of `duration` from now, unless an enclosing budget ends sooner.
    public static func withBudget<Result>(_ duration: Duration, _ body: () async throws -> Result) async rethrows -> Result {
        let proposed = ContinuousClock.now + duration
        return try await $deadline.withValue(deadline.map { min($0, proposed) } ?? proposed) { try await body() }
    }
}
