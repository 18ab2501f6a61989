import NIOPosix
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

/// Announcements (`deleteAnnouncing` and `listen`) with real Redis servers: every instance hears a
/// deletion, a listener knows when it may have missed one, and recovers after Redis comes back.
@Suite struct AnnouncementTests {
    /// What a listener heard.
    final class Heard: Sendable {
        private let messages = Mutex<[String]>([])
        private let resetCount = Atomic<Int>(0)

        /// A listener reporting here (it holds this object; the store holds the listener weakly).
        func makeListener() -> AnnouncementListener {
            AnnouncementListener(
                onMessage: { [self] message in messages.withLock { $0.append(message) } },
                onReset: { [self] in resetCount.add(1, ordering: .relaxed) }
            )
        }

        var all: [String] { messages.withLock { $0 } }
        var resets: Int { resetCount.load(ordering: .relaxed) }
    }

    /// Generous timeouts: a subscription that cannot connect within a tight one on a loaded machine
    /// keeps retrying and never proves itself, and these tests are about what is heard.
    private static func store(_ url: String) throws -> RedisStore {
        var configuration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(5), poolSize: 2)
        try configuration.apply(url: url)
        return RedisStore(configuration: configuration)
    }

    /// A store on `redis` and a listener of its announcements, once the subscription is proven.
    private static func listening(to redis: RedisServerProcess) async throws -> (RedisStore, Heard, AnnouncementListener) {
        let store = try Self.store(redis.url)
        let heard = Heard(), listener = heard.makeListener()
        store.listen(listener)
        #expect(try await eventually { listener.isCurrent }, "the subscription never proved itself")
        return (store, heard, listener)
    }

    /// A deletion announced now is heard (the listener had heard nothing before).
    private static func expectAnnouncementHeard(_ store: RedisStore, _ heard: Heard) async throws {
        try await store.set("k", [1], ttl: nil)
        #expect(try await store.deleteAnnouncing("k", "after"))
        #expect(try await eventually { heard.all == ["after"] }, "\(heard.all)")
    }

    @Test func everyInstanceHearsADeletionAndOnlyAnActualOne() async throws {
        let redis = try await RedisServerProcess.launch()
        defer { redis.stop() }
        let (a, b) = (try Self.store(redis.url), try Self.store(redis.url))
        let heard = Heard(), listener = heard.makeListener()
        b.listen(listener)
        #expect(try await eventually { listener.isCurrent }, "the subscription never proved itself")

        try await a.set("session:{s1}", [1], ttl: nil)
        #expect(try await a.deleteAnnouncing("session:{s1}", "s1"))
        #expect(try await a.get("session:{s1}") == nil)
        #expect(try await eventually { heard.all == ["s1"] }, "\(heard.all)")
        // Nothing to delete, nothing announced.
        #expect(try await !a.deleteAnnouncing("session:{s1}", "s1"))
        try await a.set("session:{s2}", [1], ttl: nil)
        #expect(try await a.deleteAnnouncing("session:{s2}", "s2"))
        #expect(try await eventually { heard.all == ["s1", "s2"] }, "\(heard.all)")
        try await a.shutdown()
        try await b.shutdown()
    }

    /// The subscription runs on an event loop, and delivers there: its proofs never wait for a
    /// thread of Swift's global pool, which a busy process may hold for longer than the proof
    /// window (its instance's caches would then be bypassed, its listeners not current).
    @Test func theSubscriptionDeliversOnAnEventLoop() async throws {
        let redis = try await RedisServerProcess.launch()
        defer { redis.stop() }
        let (a, b) = (try Self.store(redis.url), try Self.store(redis.url))
        let onLoop = Mutex<[Bool]>([])
        let listener = AnnouncementListener(
            onMessage: { _ in onLoop.withLock { $0.append(MultiThreadedEventLoopGroup.currentEventLoop != nil) } }, onReset: {})
        b.listen(listener)
        #expect(try await eventually { listener.isCurrent }, "the subscription never proved itself")
        try await a.set("k", [1], ttl: nil)
        #expect(try await a.deleteAnnouncing("k", "k"))
        #expect(try await eventually { !onLoop.withLock { $0 }.isEmpty })
        #expect(onLoop.withLock { $0 } == [true])
        try await a.shutdown()
        try await b.shutdown()
    }

    /// Redis killed, or frozen (SIGSTOP: the connection stays open but no PING is answered): one
    /// window later the listener is not current, whatever the machine's load (a killed one also
    /// resets its owner, as announcements may have been missed); Redis back: current again, and
    /// it hears the next announcement.
    @Test(arguments: [true, false])
    func aListenerIsNotCurrentWhileRedisIsGone(killed: Bool) async throws {
        let redis = try await RedisServerProcess.launch()
        defer { redis.stop() }
        let (store, heard, listener) = try await Self.listening(to: redis)
        if killed { redis.stop(abruptly: true) } else { redis.pause() }
        // A fixed wait, as it is what is tested: once the listener's window has passed.
        try await Task.sleep(for: AnnouncementListener.window + .milliseconds(50))
        #expect(!listener.isCurrent)
        if killed {
            #expect(try await eventually { heard.resets == 1 })
            try await redis.start()
        } else {
            redis.resume()
        }
        #expect(try await eventually { listener.isCurrent }, "never current again")
        try await Self.expectAnnouncementHeard(store, heard)
        try await store.shutdown()
    }

    /// A subscription nobody relies on stops proving itself: an idle instance sends Redis no PING
    /// and wakes no thread for it. The next reader is answered "not current" (it asks the store
    /// instead), and sets the proofs going again; a listener added meanwhile wakes it too.
    @Test func aSubscriptionNobodyReadsGoesQuietUntilAsked() async throws {
        let redis = try await RedisServerProcess.launch()
        defer { redis.stop() }
        let (store, heard, listener) = try await Self.listening(to: redis)
        func pings() async -> Int? {
            guard let stats = await redis.cli(["INFO", "commandstats"]),
                let line = stats.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("cmdstat_ping:") }),
                let calls = line.split(separator: ",").first?.split(separator: "=").last
            else { return nil }
            return Int(calls)
        }
        /// Redis' PING count once it stays the same for 2 s (the subscription at rest); nil when it
        /// never does within three quiet spells. Real time: the quiet spell is what is tested. Not
        /// 1 s: a pinger held up a second on a loaded machine looked at rest, then proved itself.
        func restingPings() async throws -> Int? {
            let deadline = ContinuousClock.now + AnnouncementListener.quietAfter * 3
            var last = await pings()
            while ContinuousClock.now < deadline {
                try await Task.sleep(for: .seconds(2))
                let now = await pings()
                if let now, now == last { return now }
                last = now
            }
            return nil
        }
        // A pinger held up past the 2 s on a loaded machine looks at rest, then proves itself and
        // is current: then its rest is awaited again (the reader's call has woken it).
        var quiet = 0
        var answeredNotCurrent = false
        for _ in 0..<3 where !answeredNotCurrent {
            quiet = try #require(try await restingPings(), "PINGs went on with nobody reading")
            answeredNotCurrent = !listener.isCurrent
        }
        #expect(answeredNotCurrent, "current after three quiet spells")
        #expect(try await eventually { listener.isCurrent }, "the next reader did not set the proofs going")
        #expect(try #require(await pings()) > quiet)
        // Announcements still arrive, quiet or not.
        try await Self.expectAnnouncementHeard(store, heard)

        // At rest again: a listener added meanwhile (a relay rebuilt on reload) is heard too, its
        // reader's first check setting the proofs going.
        _ = try #require(try await restingPings(), "PINGs went on with nobody reading")
        let second = Heard(), added = second.makeListener()
        store.listen(added)
        #expect(try await eventually { added.isCurrent }, "the added listener's reader did not wake the subscription")
        try await store.shutdown()
    }

    /// On a cluster, a deletion on any master reaches a listener subscribed at another node.
    @Test func clusterAnnouncementsReachEveryInstance() async throws {
        let cluster = try await RedisClusterProcess.launch(masters: 3, replicasPerMaster: 0)
        defer { cluster.stop() }
        let nodes = cluster.nodes.compactMap { RedisConfiguration.Node(parsing: $0, defaultPort: 6379) }
        // Answers, not speed: 10 s per command, as RedisClusterTests.makeStore says why.
        let writer = RedisStore(configuration: RedisConfiguration(commandTimeout: .seconds(10), poolSize: 2, cluster: nodes))
        let reader = RedisStore(configuration: RedisConfiguration(commandTimeout: .seconds(10), poolSize: 2, cluster: Array(nodes.reversed())))
        let heard = Heard(), listener = heard.makeListener()
        reader.listen(listener)
        #expect(try await eventually { listener.isCurrent })
        let tags = (0..<12).map { "c\($0)" }
        for tag in tags { try await writer.set("session:{\(tag)}", [1], ttl: nil) }
        for tag in tags { #expect(try await writer.deleteAnnouncing("session:{\(tag)}", tag)) }
        #expect(try await eventually { Set(heard.all) == Set(tags) }, "\(heard.all)")
        try await writer.shutdown()
        try await reader.shutdown()
    }

    /// On a cluster, the node a listener is subscribed at answers its PINGs whatever the other
    /// masters published and the cluster bus has not delivered yet. Its proof rests on markers
    /// published on every master: with a master that takes none (frozen here; a stalled bus link
    /// looks the same to the listener), it is not current, and it is again once the master is back.
    @Test func aClusterListenerIsCurrentOnlyWhileEveryMasterReachesIt() async throws {
        let cluster = try await RedisClusterProcess.launch(masters: 3, replicasPerMaster: 0)
        defer { cluster.stop() }
        let nodes = cluster.nodes.compactMap { RedisConfiguration.Node(parsing: $0, defaultPort: 6379) }
        // Subscribed at the first node: another master is frozen.
        let store = RedisStore(configuration: RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(5), cluster: nodes))
        let heard = Heard(), listener = heard.makeListener()
        store.listen(listener)
        #expect(try await eventually { listener.isCurrent }, "the subscription never proved itself")
        let frozen = try #require(cluster.server(port: nodes[2].port))
        frozen.pause()
        #expect(try await eventually(within: .seconds(10)) { !listener.isCurrent }, "a frozen master left the listener current")
        frozen.resume()
        #expect(try await eventually { listener.isCurrent }, "the listener stayed not current once every master was back")
        // Other instances' markers, and its own, reach no listener.
        #expect(heard.all.isEmpty, "\(heard.all)")
        try await store.shutdown()
    }

    @Test func theEmbeddedStoreAnnouncesInProcess() async throws {
        let store = EmbeddedStore()
        let heard = Heard(), listener = heard.makeListener()
        store.listen(listener)
        #expect(listener.isCurrent)
        try await store.set("k", [1], ttl: nil)
        #expect(try await store.deleteAnnouncing("k", "m"))
        #expect(try await !store.deleteAnnouncing("k", "m"))
        #expect(heard.all == ["m"])
    }
}
