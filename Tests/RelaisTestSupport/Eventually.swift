/// Waits for something to happen instead of for a fixed time: checks `condition` every `interval`
/// until it holds, and once more after `limit` (a loaded machine can oversleep the last interval,
/// which must not turn an event that came into a failure). `limit` only bounds a wait for an event
/// that will come on a healthy machine; it says nothing of how soon it should come, which a test
/// that cares measures itself. True when the condition held.
public func eventually(
    within limit: Duration = .seconds(30), every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try await condition()
}
