import Synchronization

/// The time one request may spend waiting on the store, across all its calls.
///
/// The server gives each request one (`store.request_budget`); ``RedisStore`` refuses a call once
/// it is spent, without queueing it, and waits for Redis' reply as long as what is left at most
/// (or `command_timeout`, when sooner). A request against a frozen Redis thus waits about one
/// budget instead of one `command_timeout` per call.
///
/// Only the store's waits are counted: a request that first waits on something else (a provider's
/// token endpoint at `/callback`) still has its whole budget for the store afterwards. Calls made
/// in parallel each count their own wait.
public enum StoreBudget {
    @TaskLocal static var current: Allowance?

    /// Runs `body` with a budget of `duration`, unless an enclosing budget has less left.
    public static func withBudget<Result>(_ duration: Duration, _ body: () async throws -> Result) async rethrows -> Result {
        if let current, current.left <= duration { return try await body() }
        return try await $current.withValue(Allowance(duration)) { try await body() }
    }

    /// What is left of one request's budget. Shared by the request's tasks, so atomic.
    final class Allowance: Sendable {
        private let nanoseconds: Atomic<Int64>

        init(_ duration: Duration) { nanoseconds = Atomic(duration.nanoseconds) }

        var left: Duration { .nanoseconds(nanoseconds.load(ordering: .relaxed)) }

        /// The latest a call starting at `start` may wait until; nil once the budget is spent.
        func deadline(from start: ContinuousClock.Instant) -> ContinuousClock.Instant? {
            let left = nanoseconds.load(ordering: .relaxed)
            return left > 0 ? start + .nanoseconds(left) : nil
        }

        /// Counts what a call waited.
        func spend(since start: ContinuousClock.Instant) {
            nanoseconds.subtract((ContinuousClock.now - start).nanoseconds, ordering: .relaxed)
        }
    }
}
