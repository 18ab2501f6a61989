import Logging
import RelaisTestSupport
import ServiceLifecycle
import Synchronization
import Testing

@testable import RelaisServer

@Suite struct MemoryReturnerTests {
    /// One release after each wait, every round, until the wait is cut.
    @Test(.tags(.fast)) func freeMemoryIsReturnedAfterEveryInterval() async throws {
        let rounds = Mutex<[String]>([])
        let returner = MemoryReturner(
            interval: .seconds(30),
            release: { rounds.withLock { $0.append("release") } },
            wait: { interval in
                let waited = rounds.withLock { log -> Int in
                    log.append("wait \(interval)")
                    return log.count { $0.hasPrefix("wait") }
                }
                if waited == 3 { throw CancellationError() }
            }
        )
        try await returner.run()
        #expect(rounds.withLock { $0 } == ["wait 30.0 seconds", "release", "wait 30.0 seconds", "release", "wait 30.0 seconds"])
    }

    /// The real service, with glibc's trim, ends as soon as graceful shutdown begins.
    @Test func gracefulShutdownEndsTheWait() async throws {
        MemoryReturner.trim()  // callable here: returns what it can, changes nothing else
        let group = ServiceGroup(services: [MemoryReturner(interval: .seconds(3600))], logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await Task.yield()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}
