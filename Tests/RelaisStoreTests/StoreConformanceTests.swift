import RelaisClock
import RelaisStore
import RelaisTestSupport
import Testing

/// One suite, both stores: every behaviour Relais relies on holds for Redis (over plain TCP, over
/// TLS through the tunnel, and over a Unix-domain socket) and the embedded store.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case embedded, redis, redisTLS, redisUnix, redisCluster
    var testDescription: String { rawValue }
}

/// A store under test plus whatever it runs on; `close()` stops both.
struct StoreFixture {
    let store: any KeyValueStore
    let redis: RedisServerProcess?
    let cluster: RedisClusterProcess?
    let time: StoreTime

    init(_ kind: StoreKind) async throws {
        switch kind {
        case .embedded:
            let clock = ManualClock()
            store = EmbeddedStore(sweepInterval: 16, clock: clock)
            redis = nil
            cluster = nil
            time = StoreTime(manual: clock)
            return
        case .redis:
            let server = try await RedisServerProcess.launch()
            var configuration = Self.redisConfiguration()
            try configuration.apply(url: server.url)
            store = RedisStore(configuration: configuration)
            redis = server
            cluster = nil
            time = StoreTime(manual: nil)
        case .redisTLS:
            let server = try await RedisServerProcess.launch(tls: try TestCertificates.make())
            var configuration = Self.redisConfiguration()
            try configuration.apply(url: server.url)
            configuration.tls?.caBundlePath = server.tls?.serverCertificate
            store = RedisStore(configuration: configuration)
            redis = server
            cluster = nil
            time = StoreTime(manual: nil)
        case .redisUnix:
            let server = try await RedisServerProcess.launch(unixSocket: true)
            var configuration = Self.redisConfiguration()
            // No Redis listens on TCP port 1: every command must have gone through the socket.
            configuration.port = 1
            try configuration.apply(url: try #require(server.socketURL))
            store = RedisStore(configuration: configuration)
            redis = server
            cluster = nil
            time = StoreTime(manual: nil)
        case .redisCluster:
            // Three masters: the suite's keys spread over them, and its multi-key steps (one hash
            // tag each) must each stay on one.
            let launched = try await RedisClusterProcess.launch(masters: 3, replicasPerMaster: 0)
            var configuration = Self.redisConfiguration()
            configuration.cluster = launched.nodes.compactMap { RedisConfiguration.Node(parsing: $0, defaultPort: 6379) }
            store = RedisStore(configuration: configuration)
            redis = nil
            cluster = launched
            time = StoreTime(manual: nil)
        }
    }

    /// The suite checks what the store does, not how fast: a command may wait 10 s (the default is
    /// 1 s), so that a machine whose cores are all busy (CI, `make test` beside 4 busy loops, where
    /// calls queued for a pool of 2 waited past 1 s) fails only on a wrong answer. Timeouts have
    /// their own tests (RedisStoreTests, RelayStoreOutageTests).
    private static func redisConfiguration() -> RedisConfiguration {
        RedisConfiguration(commandTimeout: .seconds(10), poolSize: 2)
    }

    func close() async throws {
        try await store.shutdown()
        redis?.stop()
        cluster?.stop()
    }
}

func withStore(_ kind: StoreKind, _ body: (any KeyValueStore, StoreTime) async throws -> Void) async throws {
    let fixture = try await StoreFixture(kind)
    do {
        try await body(fixture.store, fixture.time)
        try await fixture.close()
    } catch {
        try? await fixture.close()
        throw error
    }
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Time as the store under test counts it. The embedded store runs on a ``ManualClock`` that
/// tests move at once; a Redis server counts real time, so waiting for its TTLs is real waiting.
struct StoreTime: Sendable {
    let manual: ManualClock?

    var now: ContinuousClock.Instant { manual?.instant ?? ContinuousClock.now }

    func pass(_ duration: Duration) async throws {
        if let manual { manual.advance(by: duration) } else { try await Task.sleep(for: duration) }
    }

    func stopwatch() -> Stopwatch { Stopwatch(time: self, start: now) }
}

/// Elapsed store time since creation, to tell whether a TTL can have run out (always zero on the
/// manual clock until a test moves it, so the embedded store's checks are never skipped).
struct Stopwatch {
    let time: StoreTime
    let start: ContinuousClock.Instant
    var elapsed: Duration { time.now - start }
}

@Suite struct StoreConformanceTests {
    @Test(arguments: StoreKind.allCases)
    func setThenGetReturnsTheValue(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("a", bytes("one"), ttl: nil)
            #expect(try await store.get("a") == bytes("one"))
            try await store.set("a", bytes("two"), ttl: nil)
            #expect(try await store.get("a") == bytes("two"))
            #expect(try await store.get("missing") == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func countersIncrementAtomicallyWithinTheirWindow(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            let counts = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 { group.addTask { try await store.increment("hits", window: .seconds(60)) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(counts.sorted() == Array(1...20))
            guard case .expiresIn(let remaining) = try await store.timeToLive("hits") else {
                Issue.record("a counter must carry its window")
                return
            }
            #expect(remaining <= .seconds(60) && remaining > .seconds(30))
            try await store.set("text", bytes("not a number"), ttl: nil)
            await #expect(throws: StoreError.self) { try await store.increment("text", window: .seconds(1)) }
            _ = try await store.increment("short", window: .milliseconds(300))
            try await time.pass(.milliseconds(900))
            #expect(try await store.increment("short", window: .milliseconds(300)) == 1)  // a new window
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentCallsEachGetTheirOwnReply(kind: StoreKind) async throws {
        // Redis calls are pipelined in batches: every reply must reach the call that asked.
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<300 {
                    group.addTask {
                        let value = bytes("value-\(index)-" + String(repeating: "x", count: index % 50))
                        try await store.set("pipelined-\(index)", value, ttl: .seconds(60))
                        let read = try await store.get("pipelined-\(index)")
                        let missing = try await store.get("absent-\(index)")
                        return read == value && missing == nil ? 0 : 1
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(mismatches == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func binaryValuesRoundTripWhole(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            let value: [UInt8] = [0, 1, 0, 255, 0] + Array(repeating: 7, count: 10_000) + [0]
            try await store.set("binary", value, ttl: nil)
            #expect(try await store.get("binary") == value)
            try await store.set("empty", [], ttl: nil)
            #expect(try await store.get("empty") == [])
        }
    }

    // Timing on shared 2-core machines: a check that something is *still there* is only made when
    // the stopwatch proves the TTL had not run out yet; checks that something is *gone* are made
    // after generous sleeps, which scheduling delays can only lengthen.

    @Test(arguments: StoreKind.allCases)
    func valuesExpireAfterTheirTTL(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            let watch = time.stopwatch()
            try await store.set("short", bytes("v"), ttl: .seconds(1))
            try await store.set("long", bytes("v"), ttl: .seconds(60))
            let short = try await store.get("short")
            if watch.elapsed < .seconds(1) { #expect(short == bytes("v")) }
            guard case .expiresIn(let remaining) = try await store.timeToLive("long") else {
                Issue.record("expected a TTL")
                return
            }
            #expect(remaining > .seconds(60) - watch.elapsed - .seconds(1) && remaining <= .seconds(60))
            try await time.pass(.milliseconds(1500))
            #expect(try await store.get("short") == nil)
            #expect(try await store.timeToLive("short") == .missing)
            #expect(try await store.get("long") == bytes("v"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func setWithoutTTLIsPersistentAndExpireAddsOne(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("k", bytes("v"), ttl: nil)
            #expect(try await store.timeToLive("k") == .persistent)
            #expect(try await store.expire("k", ttl: .milliseconds(300)))
            #expect(try await store.expire("missing", ttl: .seconds(1)) == false)
            try await time.pass(.milliseconds(800))
            #expect(try await store.get("k") == nil)
            #expect(try await store.expire("k", ttl: .seconds(1)) == false)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func getAndDeleteHandsTheValueOutOnce(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("code", bytes("session-1"), ttl: .seconds(30))
            #expect(try await store.getAndDelete("code") == bytes("session-1"))
            #expect(try await store.getAndDelete("code") == nil)
            #expect(try await store.get("code") == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentGetAndDeleteHasExactlyOneWinner(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            for round in 0..<20 {
                try await store.set("code-\(round)", bytes("v"), ttl: .seconds(30))
                let winners = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<8 {
                        group.addTask { try await store.getAndDelete("code-\(round)") == nil ? 0 : 1 }
                    }
                    return try await group.reduce(0, +)
                }
                #expect(winners == 1)
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func takeAppliesItsWritesOnlyWhenTheKeyExists(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("code:{s1}", bytes("record"), ttl: .seconds(30))
            try await store.set("old:{s1}", bytes("x"), ttl: nil)
            let writes: [StoreWrite] = [
                .set("session:{s1}", bytes("session"), ttl: .seconds(30)), .set("used:{s1}", [0, 1, 0, 255], ttl: nil), .delete("old:{s1}"),
            ]
            #expect(try await store.take("code:{s1}", applying: writes) == bytes("record"))
            #expect(try await store.get("code:{s1}") == nil)
            #expect(try await store.get("session:{s1}") == bytes("session"))
            #expect(try await store.get("used:{s1}") == [0, 1, 0, 255])
            #expect(try await store.timeToLive("used:{s1}") == .persistent)
            #expect(try await store.get("old:{s1}") == nil)
            guard case .expiresIn(let ttl) = try await store.timeToLive("session:{s1}") else { Issue.record("no TTL on the session"); return }
            #expect(ttl <= .seconds(30) && ttl > .zero)

            // Taken already: nothing is written, whatever the writes.
            #expect(try await store.take("code:{s1}", applying: [.set("session:{s1}", bytes("other"), ttl: nil), .set("new:{s1}", bytes("n"), ttl: nil)]) == nil)
            #expect(try await store.get("session:{s1}") == bytes("session"))
            #expect(try await store.get("new:{s1}") == nil)

            // A key of another kind is refused before any write.
            try await store.setAdd("set:{s2}", member: "m", ttl: nil)
            await #expect(throws: StoreError.wrongType(key: "set:{s2}")) { try await store.take("set:{s2}", applying: [.set("w:{s2}", bytes("w"), ttl: nil)]) }
            #expect(try await store.get("w:{s2}") == nil)
            #expect(try await store.setMembers("set:{s2}") == ["m"])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func applyIfEqualWritesOnlyOverTheExpectedValue(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("session:{s1}", bytes("v1"), ttl: .seconds(30))
            try await store.set("grace:{s1}", bytes("g"), ttl: nil)
            let writes: [StoreWrite] = [.set("session:{s1}", bytes("v2"), ttl: .seconds(60)), .delete("grace:{s1}")]
            // Another value, a prefix of it, or nothing at all: no write.
            #expect(try await store.apply(writes, ifEqual: "session:{s1}", bytes("v0")) == false)
            #expect(try await store.apply(writes, ifEqual: "session:{s1}", bytes("v")) == false)
            #expect(try await store.apply(writes, ifEqual: "absent:{s1}", []) == false)
            #expect(try await store.get("session:{s1}") == bytes("v1"))
            #expect(try await store.get("grace:{s1}") == bytes("g"))

            #expect(try await store.apply(writes, ifEqual: "session:{s1}", bytes("v1")))
            #expect(try await store.get("session:{s1}") == bytes("v2"))
            #expect(try await store.get("grace:{s1}") == nil)
            guard case .expiresIn(let ttl) = try await store.timeToLive("session:{s1}") else { Issue.record("no TTL on the session"); return }
            #expect(ttl <= .seconds(60) && ttl > .seconds(30))
            // The old value no longer matches: a second swap from it is refused.
            #expect(try await store.apply([.set("session:{s1}", bytes("v3"), ttl: nil)], ifEqual: "session:{s1}", bytes("v1")) == false)
            #expect(try await store.get("session:{s1}") == bytes("v2"))

            try await store.setAdd("set:{s2}", member: "m", ttl: nil)
            await #expect(throws: StoreError.wrongType(key: "set:{s2}")) {
                try await store.apply([.set("w:{s2}", bytes("w"), ttl: nil)], ifEqual: "set:{s2}", bytes("m"))
            }
            #expect(try await store.get("w:{s2}") == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentSwapsFromOneValueHaveExactlyOneWinner(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("counter:{c}", bytes("0"), ttl: nil)
            let winners = try await withThrowingTaskGroup(of: Int?.self) { group in
                for contender in 1...8 {
                    group.addTask {
                        try await store.apply([.set("counter:{c}", bytes("\(contender)"), ttl: nil)], ifEqual: "counter:{c}", bytes("0")) ? contender : nil
                    }
                }
                return try await group.reduce(into: [Int]()) { if let winner = $1 { $0.append(winner) } }
            }
            #expect(winners.count == 1)
            #expect(try await store.get("counter:{c}") == bytes("\(winners.first ?? -1)"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentTakesHaveExactlyOneWinnerAndOnlyItsWrites(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            for round in 0..<10 {
                try await store.set("code:{r\(round)}", bytes("v"), ttl: .seconds(30))
                let winners = try await withThrowingTaskGroup(of: [Int].self) { group in
                    for caller in 0..<6 {
                        group.addTask {
                            let writes: [StoreWrite] = [.set("owner:{r\(round)}", bytes("\(caller)"), ttl: nil), .set("mark:{r\(round)}:\(caller)", [1], ttl: nil)]
                            return try await store.take("code:{r\(round)}", applying: writes) == nil ? [] : [caller]
                        }
                    }
                    return try await group.reduce([], +)
                }
                try #require(winners.count == 1)
                #expect(try await store.get("owner:{r\(round)}") == bytes("\(winners[0])"))
                for caller in 0..<6 {
                    #expect((try await store.get("mark:{r\(round)}:\(caller)") != nil) == (caller == winners[0]))
                }
            }
        }
    }

    /// A set over its listing threshold after the addition comes back with its members (the person
    /// over their limit of sessions): at the threshold it does not, nor does a set without one; on
    /// every store, for a take and a claim, in both shapes (the sets beside the key, or elsewhere).
    @Test(arguments: StoreKind.allCases)
    func indexedStepsListTheSetsOverTheirThreshold(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            for (tag, person, other) in [("l1", "person:{l1}", "idp:{l1}"), ("l2", "person:bob", "idp:session-7")] {
                try await store.setAdd(person, member: "earlier", ttl: nil)
                try await store.set("code:{\(tag)}", bytes("record"), ttl: .seconds(30))
                // Two members after the addition, the threshold 2: not listed.
                var indexes = [SetMembership(person, member: "s1-\(tag)", ttl: nil, listedAbove: 2), SetMembership(other, member: "s1-\(tag)", ttl: nil)]
                let taken = try await store.take("code:{\(tag)}", applying: [], indexing: indexes)
                #expect(taken == IndexedTake(value: bytes("record"), setSizes: [2, 1], listed: [nil, nil]), "\(person)")
                // Three, over it: listed, the new member among them; the set without a threshold is not.
                indexes = [SetMembership(person, member: "s2-\(tag)", ttl: nil, listedAbove: 2), SetMembership(other, member: "s2-\(tag)", ttl: nil)]
                let claimed = try await store.once(.claim("mark:{\(tag)}", mark: bytes("1"), ttl: .seconds(60)), applying: [], indexing: indexes)
                #expect(
                    claimed == IndexedTake(value: bytes("1"), setSizes: [3, 2], listed: [["earlier", "s1-\(tag)", "s2-\(tag)"], nil]), "\(person)")
                // A guard that does not hold lists nothing: there is no step.
                #expect(try await store.once(.claim("mark:{\(tag)}", mark: bytes("1"), ttl: .seconds(60)), applying: [], indexing: indexes) == nil)
            }
        }
    }

    /// Both shapes of an indexed take: sets that share the taken key's hash tag (one step on every
    /// store) and sets elsewhere (on a cluster: other nodes, indexes first).
    @Test(arguments: StoreKind.allCases)
    func indexedTakeAddsItsMembersOnlyWithTheTake(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            for (tag, person, other) in [("t1", "person:{t1}", "idp:{t1}"), ("t2", "person:alice", "idp:session-9")] {
                try await store.set("code:{\(tag)}", bytes("record"), ttl: .seconds(30))
                try await store.setAdd(person, member: "earlier", ttl: nil)
                let indexes = [SetMembership(person, member: "s-\(tag)", ttl: .seconds(60)), SetMembership(other, member: "s-\(tag)", ttl: nil)]
                let taken = try await store.take("code:{\(tag)}", applying: [.set("session:{\(tag)}", bytes("session"), ttl: .seconds(30))], indexing: indexes)
                #expect(taken == IndexedTake(value: bytes("record"), setSizes: [2, 1]), "\(person)")
                #expect(try await store.get("code:{\(tag)}") == nil)
                #expect(try await store.get("session:{\(tag)}") == bytes("session"))
                #expect(try await store.setMembers(person) == ["earlier", "s-\(tag)"])
                #expect(try await store.setMembers(other) == ["s-\(tag)"])
                guard case .expiresIn(let ttl) = try await store.timeToLive(person) else { Issue.record("no TTL on \(person)"); return }
                #expect(ttl <= .seconds(60) && ttl > .seconds(30))
                #expect(try await store.timeToLive(other) == .persistent)

                // Taken already: no member is added (or none is left), nothing is written.
                let again = [SetMembership(person, member: "late-\(tag)", ttl: nil), SetMembership(other, member: "late-\(tag)", ttl: nil)]
                #expect(try await store.take("code:{\(tag)}", applying: [.set("session:{\(tag)}", bytes("other"), ttl: nil)], indexing: again) == nil)
                #expect(try await store.setMembers(person) == ["earlier", "s-\(tag)"])
                #expect(try await store.setMembers(other) == ["s-\(tag)"])
                #expect(try await store.get("session:{\(tag)}") == bytes("session"))

                // A set key holding a value is refused before the key is taken: nothing is lost.
                try await store.set("code:{\(tag)}", bytes("second"), ttl: .seconds(30))
                try await store.set("value:{\(tag)}", bytes("v"), ttl: nil)
                let wrong = [SetMembership(person, member: "w-\(tag)", ttl: nil), SetMembership("value:{\(tag)}", member: "w-\(tag)", ttl: nil)]
                await #expect(throws: StoreError.wrongType(key: "value:{\(tag)}")) {
                    try await store.take("code:{\(tag)}", applying: [.set("new:{\(tag)}", bytes("n"), ttl: nil)], indexing: wrong)
                }
                #expect(try await store.get("code:{\(tag)}") == bytes("second"))
                #expect(try await store.get("new:{\(tag)}") == nil)
                #expect(try await store.get("value:{\(tag)}") == bytes("v"))
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentIndexedTakesLeaveOnlyTheWinnersMember(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            for round in 0..<5 {
                try await store.set("code:{i\(round)}", bytes("v"), ttl: .seconds(30))
                let winners = try await withThrowingTaskGroup(of: [Int].self) { group in
                    for caller in 0..<6 {
                        group.addTask {
                            let indexes = [SetMembership("person:i\(round)", member: "s\(caller)", ttl: nil)]
                            let taken = try await store.take("code:{i\(round)}", applying: [.set("owner:{i\(round)}", bytes("\(caller)"), ttl: nil)], indexing: indexes)
                            return taken == nil ? [] : [caller]
                        }
                    }
                    return try await group.reduce([], +)
                }
                try #require(winners.count == 1)
                #expect(try await store.get("owner:{i\(round)}") == bytes("\(winners[0])"))
                #expect(try await store.setMembers("person:i\(round)") == ["s\(winners[0])"])
            }
        }
    }

    /// A claim is a take inverted: the step runs only while its key is absent, and leaves the key
    /// set (a used-mark), so a sealed code that carries its own record is redeemed once.
    @Test(arguments: StoreKind.allCases)
    func indexedClaimRunsOnlyWhileItsMarkIsAbsent(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            for (tag, person, other) in [("c1", "person:{c1}", "idp:{c1}"), ("c2", "person:carol", "idp:session-7")] {
                try await store.setAdd(person, member: "earlier", ttl: nil)
                let indexes = [SetMembership(person, member: "s-\(tag)", ttl: .seconds(60)), SetMembership(other, member: "s-\(tag)", ttl: nil)]
                let claim = OneTimeKey.claim("used:{\(tag)}", mark: bytes("1"), ttl: .seconds(90))
                let claimed = try await store.once(claim, applying: [.set("session:{\(tag)}", bytes("session"), ttl: .seconds(30))], indexing: indexes)
                #expect(claimed == IndexedTake(value: bytes("1"), setSizes: [2, 1]), "\(person)")
                #expect(try await store.get("used:{\(tag)}") == bytes("1"))
                guard case .expiresIn(let markTTL) = try await store.timeToLive("used:{\(tag)}") else { Issue.record("no TTL on the mark"); return }
                #expect(markTTL <= .seconds(90) && markTTL > .seconds(60))
                #expect(try await store.get("session:{\(tag)}") == bytes("session"))
                #expect(try await store.setMembers(person) == ["earlier", "s-\(tag)"])
                #expect(try await store.setMembers(other) == ["s-\(tag)"])

                // Claimed already: no member is added (or none is left), nothing is written.
                let again = [SetMembership(person, member: "late-\(tag)", ttl: nil), SetMembership(other, member: "late-\(tag)", ttl: nil)]
                #expect(try await store.once(claim, applying: [.set("second:{\(tag)}", bytes("other"), ttl: nil)], indexing: again) == nil)
                #expect(try await store.setMembers(person) == ["earlier", "s-\(tag)"])
                #expect(try await store.setMembers(other) == ["s-\(tag)"])
                #expect(try await store.get("second:{\(tag)}") == nil)

                // A record the step would set exists (its mark gone, say): nothing is overwritten, also
                // when a delete comes first among the writes, and the members it shares with that
                // record stay (on a cluster they were added before the claim was refused).
                let unmarked = OneTimeKey.claim("used3:{\(tag)}", mark: bytes("1"), ttl: .seconds(90))
                let same = [SetMembership(person, member: "s-\(tag)", ttl: nil), SetMembership(other, member: "s-\(tag)", ttl: nil)]
                for writes: [StoreWrite] in [
                    [.set("session:{\(tag)}", bytes("overwritten"), ttl: nil)], [.delete("gone:{\(tag)}"), .set("session:{\(tag)}", bytes("overwritten"), ttl: nil)],
                ] {
                    #expect(try await store.once(unmarked, applying: writes, indexing: same) == nil)
                    #expect(try await store.get("used3:{\(tag)}") == nil)
                    #expect(try await store.get("session:{\(tag)}") == bytes("session"))
                    #expect(try await store.setMembers(person) == ["earlier", "s-\(tag)"])
                    #expect(try await store.setMembers(other) == ["s-\(tag)"])
                }
                // A deleted key is no creation, and does not stop a claim.
                try await store.set("old:{\(tag)}", bytes("o"), ttl: nil)
                let deleting = OneTimeKey.claim("used4:{\(tag)}", mark: bytes("1"), ttl: .seconds(90))
                let claimedAgain = try await store.once(deleting, applying: [.delete("old:{\(tag)}"), .set("fresh:{\(tag)}", bytes("f"), ttl: nil)], indexing: again)
                #expect(claimedAgain == IndexedTake(value: bytes("1"), setSizes: [3, 2]))
                #expect(try await store.get("old:{\(tag)}") == nil)
                #expect(try await store.get("fresh:{\(tag)}") == bytes("f"))
                #expect(try await store.setMembers(person) == ["earlier", "s-\(tag)", "late-\(tag)"])

                // A set key holding a value is refused before the mark is set: the claim stays open.
                try await store.set("value:{\(tag)}", bytes("v"), ttl: nil)
                let wrong = [SetMembership(person, member: "w-\(tag)", ttl: nil), SetMembership("value:{\(tag)}", member: "w-\(tag)", ttl: nil)]
                let fresh = OneTimeKey.claim("used2:{\(tag)}", mark: bytes("1"), ttl: .seconds(90))
                await #expect(throws: StoreError.wrongType(key: "value:{\(tag)}")) {
                    try await store.once(fresh, applying: [.set("new:{\(tag)}", bytes("n"), ttl: nil)], indexing: wrong)
                }
                #expect(try await store.get("used2:{\(tag)}") == nil)
                #expect(try await store.get("new:{\(tag)}") == nil)
            }
        }
    }

    /// Concurrent claims of one mark, as one code redeemed twice at once: one wins, and the losers
    /// (on a cluster, refused after adding the shared member) leave the winner's member in place.
    @Test(arguments: StoreKind.allCases)
    func concurrentIndexedClaimsKeepTheWinnersMember(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            for round in 0..<5 {
                let winners = try await withThrowingTaskGroup(of: [Int].self) { group in
                    for caller in 0..<6 {
                        group.addTask {
                            // One session id for every caller, as when one code is redeemed twice at once.
                            let indexes = [SetMembership("person:k\(round)", member: "s", ttl: nil)]
                            let claim = OneTimeKey.claim("used:{k\(round)}", mark: bytes("\(caller)"), ttl: .seconds(30))
                            let claimed = try await store.once(claim, applying: [.set("owner:{k\(round)}", bytes("\(caller)"), ttl: nil)], indexing: indexes)
                            return claimed == nil ? [] : [caller]
                        }
                    }
                    return try await group.reduce([], +)
                }
                try #require(winners.count == 1)
                #expect(try await store.get("owner:{k\(round)}") == bytes("\(winners[0])"))
                #expect(try await store.get("used:{k\(round)}") == bytes("\(winners[0])"))
                #expect(try await store.setMembers("person:k\(round)") == ["s"])
            }
        }
    }

    @Test(arguments: StoreKind.allCases)
    func applyWritesEverythingAtOnce(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("b:{t}", bytes("old"), ttl: nil)
            let stopwatch = time.stopwatch()
            try await store.apply([.set("a:{t}", bytes("1"), ttl: .seconds(1)), .delete("b:{t}"), .set("c:{t}", bytes("3"), ttl: nil)])
            // A busy machine may take the whole second: the check then only holds for the rest.
            if stopwatch.elapsed < .milliseconds(900) { #expect(try await store.get("a:{t}") == bytes("1")) }
            #expect(try await store.get("b:{t}") == nil)
            #expect(try await store.get("c:{t}") == bytes("3"))
            try await store.apply([])
            try await time.pass(.milliseconds(1500))
            #expect(try await store.get("a:{t}") == nil)
            #expect(try await store.get("c:{t}") == bytes("3"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func deleteReportsWhetherTheKeyExisted(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("k", bytes("v"), ttl: nil)
            #expect(try await store.delete("k"))
            #expect(try await store.delete("k") == false)
            try await store.set("gone", bytes("v"), ttl: .milliseconds(50))
            try await time.pass(.milliseconds(200))
            #expect(try await store.delete("gone") == false)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func setIfAbsentIsALockThatExpires(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            let watch = time.stopwatch()
            #expect(try await store.setIfAbsent("lock", bytes("owner-a"), ttl: .seconds(2)))
            let second = try await store.setIfAbsent("lock", bytes("owner-b"), ttl: .seconds(2))
            let holder = try await store.get("lock")
            if watch.elapsed < .seconds(2) {
                #expect(second == false)
                #expect(holder == bytes("owner-a"))
            }
            try await time.pass(.milliseconds(2500))
            #expect(try await store.setIfAbsent("lock", bytes("owner-c"), ttl: .seconds(30)))
            #expect(try await store.get("lock") == bytes("owner-c"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func concurrentSetIfAbsentHasExactlyOneWinner(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            let winners = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<16 {
                    group.addTask { try await store.setIfAbsent("lock", bytes("owner-\(index)"), ttl: .seconds(5)) ? 1 : 0 }
                }
                return try await group.reduce(0, +)
            }
            #expect(winners == 1)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func deleteIfEqualReleasesOnlyTheOwnersLock(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            #expect(try await store.setIfAbsent("lock", bytes("owner-a"), ttl: .seconds(120)))  // far longer than the test, even starved
            #expect(try await store.deleteIfEqual("lock", bytes("owner-b")) == false)
            #expect(try await store.get("lock") == bytes("owner-a"))
            #expect(try await store.deleteIfEqual("lock", bytes("owner-a")))
            #expect(try await store.get("lock") == nil)
            #expect(try await store.deleteIfEqual("lock", bytes("owner-a")) == false)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func setMembershipIndexesSessions(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            #expect(try await store.setMembers("user:1") == [])
            // Each add says how many members the set has now (a repeated member counts once).
            #expect(try await store.setAdd("user:1", member: "s1", ttl: nil) == 1)
            #expect(try await store.setAdd("user:1", member: "s2", ttl: nil) == 2)
            #expect(try await store.setAdd("user:1", member: "s2", ttl: nil) == 2)
            #expect(try await store.setMembers("user:1") == ["s1", "s2"])
            #expect(try await store.setRemove("user:1", member: "s1"))
            #expect(try await store.setRemove("user:1", member: "s1") == false)
            #expect(try await store.setMembers("user:1") == ["s2"])
            #expect(try await store.setRemove("user:1", member: "s2"))
            #expect(try await store.timeToLive("user:1") == .missing)  // an empty set does not exist
        }
    }

    @Test(arguments: StoreKind.allCases)
    func setTTLIsRenewedByEachAdd(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            let watch = time.stopwatch()
            try await store.setAdd("user:2", member: "s1", ttl: .seconds(2))
            let firstAdded = watch.elapsed
            try await store.setAdd("user:2", member: "s2", ttl: .seconds(4))
            let secondAdded = watch.elapsed
            try await time.pass(.milliseconds(2500))  // past the first TTL, within the renewed one
            let members = try await store.setMembers("user:2")
            if secondAdded < .seconds(2) && watch.elapsed - firstAdded < .seconds(4) {
                #expect(members == ["s1", "s2"])
            }
            try await time.pass(.milliseconds(4500))
            #expect(try await store.setMembers("user:2") == [])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func readingAValueAsASetOrTheReverseIsAWrongTypeError(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("value", bytes("v"), ttl: nil)
            try await store.setAdd("set", member: "m", ttl: nil)
            await #expect(throws: StoreError.wrongType(key: "value")) { try await store.setMembers("value") }
            await #expect(throws: StoreError.wrongType(key: "set")) { try await store.get("set") }
            await #expect(throws: StoreError.wrongType(key: "value")) { try await store.setAdd("value", member: "m", ttl: nil) }
            // The failed calls changed nothing.
            #expect(try await store.get("value") == bytes("v"))
            #expect(try await store.setMembers("set") == ["m"])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func getManyReadsEveryKeyInItsPlace(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            #expect(try await store.getMany([]).isEmpty)
            // More keys than one pipelined batch (RedisStore.readBatch), spread over a cluster's
            // nodes; values with CR, LF and NUL, which a misread reply would cut or shift.
            let count = RedisStore.readBatch * 2 + 44
            for index in 0..<count { try await store.set("k\(index)", bytes("v\(index)\r\n") + [0, UInt8(index % 256)], ttl: nil) }
            var keys = ["missing"] + (0..<count).map { "k\($0)" } + ["k7", "also-missing"]
            keys.insert("gone", at: RedisStore.readBatch)
            let values = try await store.getMany(keys)
            #expect(values.count == keys.count)
            for (key, value) in zip(keys, values) {
                guard let index = Int(key.dropFirst()), key.first == "k" else {
                    #expect(value == nil, "\(key)")
                    continue
                }
                #expect(value == bytes("v\(index)\r\n") + [0, UInt8(index % 256)], "\(key)")
            }
            // A key holding a set is refused, as get(_:) refuses it, and changes nothing.
            try await store.setAdd("set", member: "m", ttl: nil)
            await #expect(throws: StoreError.wrongType(key: "set")) { try await store.getMany(["k1", "set", "k2"]) }
            #expect(try await store.setMembers("set") == ["m"])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func deleteAnnouncingTakesItsSetInTheSameStep(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            try await store.set("session:{a}", bytes("record"), ttl: nil)
            for member in ["d1", "d2"] { try await store.setAdd("approved:{a}", member: member, ttl: nil) }
            var outcome = try await store.deleteAnnouncing("session:{a}", "a", taking: "approved:{a}")
            #expect(outcome.existed && outcome.taken == ["d1", "d2"])
            #expect(try await store.get("session:{a}") == nil)
            #expect(try await store.setMembers("approved:{a}").isEmpty)
            outcome = try await store.deleteAnnouncing("session:{a}", "a", taking: "approved:{a}")
            #expect(!outcome.existed && outcome.taken.isEmpty)
            // The set is taken whether or not the key was there.
            try await store.setAdd("approved:{b}", member: "d3", ttl: nil)
            outcome = try await store.deleteAnnouncing("session:{b}", "b", taking: "approved:{b}")
            #expect(!outcome.existed && outcome.taken == ["d3"])
            #expect(try await store.setMembers("approved:{b}").isEmpty)
            // A value where the set should be: refused, and nothing changed.
            try await store.set("session:{c}", bytes("record"), ttl: nil)
            try await store.set("approved:{c}", bytes("not a set"), ttl: nil)
            await #expect(throws: StoreError.wrongType(key: "approved:{c}")) {
                try await store.deleteAnnouncing("session:{c}", "c", taking: "approved:{c}")
            }
            #expect(try await store.get("session:{c}") == bytes("record"))
            #expect(try await store.get("approved:{c}") == bytes("not a set"))
            #expect(try await store.deleteAnnouncing("session:{c}", "c"))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func deleteAnnouncingLeavesItsEntryWithTheDeletion(kind: StoreKind) async throws {
        try await withStore(kind) { (store: any KeyValueStore, time: StoreTime) async throws -> Void in
            // The index has no hash tag: on a cluster it lives apart from the session's keys.
            for member in ["a", "b", "c"] { try await store.setAdd("sub:person", member: member, ttl: .seconds(600)) }
            try await store.set("session:{a}", bytes("record"), ttl: nil)
            try await store.setAdd("approved:{a}", member: "d1", ttl: nil)
            var outcome = try await store.deleteAnnouncing("session:{a}", "a", taking: "approved:{a}", leaving: SetEntry("sub:person", member: "a"))
            #expect(outcome.existed && outcome.taken == ["d1"])
            #expect(try await store.get("session:{a}") == nil)
            #expect(try await store.setMembers("sub:person") == ["b", "c"])
            #expect(try await store.timeToLive("sub:person") != .persistent)
            // Without a set to take, and for a key already gone: the entry leaves all the same.
            outcome = try await store.deleteAnnouncing("session:{b}", "b", taking: nil, leaving: SetEntry("sub:person", member: "b"))
            #expect(!outcome.existed && outcome.taken.isEmpty)
            #expect(try await store.setMembers("sub:person") == ["c"])
            // The last member gone, the set is gone (as Redis does).
            try await store.set("session:{c}", bytes("record"), ttl: nil)
            #expect(try await store.deleteAnnouncing("session:{c}", "c", taking: "approved:{c}", leaving: SetEntry("sub:person", member: "c")).existed)
            #expect(try await store.timeToLive("sub:person") == .missing)
            // A value where the index should be: the session still ends, the value stays as it was.
            try await store.set("sub:other", bytes("not a set"), ttl: nil)
            try await store.set("session:{e}", bytes("record"), ttl: nil)
            #expect(try await store.deleteAnnouncing("session:{e}", "e", taking: "approved:{e}", leaving: SetEntry("sub:other", member: "e")).existed)
            #expect(try await store.get("session:{e}") == nil)
            #expect(try await store.get("sub:other") == bytes("not a set"))
            // A value where the set to take should be: refused before anything changes, the entry included.
            try await store.setAdd("sub:person", member: "f", ttl: nil)
            try await store.set("session:{f}", bytes("record"), ttl: nil)
            try await store.set("approved:{f}", bytes("not a set"), ttl: nil)
            await #expect(throws: StoreError.wrongType(key: "approved:{f}")) {
                try await store.deleteAnnouncing("session:{f}", "f", taking: "approved:{f}", leaving: SetEntry("sub:person", member: "f"))
            }
            #expect(try await store.get("session:{f}") == bytes("record"))
            #expect(try await store.setMembers("sub:person") == ["f"])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func pingAnswersAndShutdownStoresRefuseCalls(kind: StoreKind) async throws {
        let fixture = try await StoreFixture(kind)
        try await fixture.store.ping()
        try await fixture.store.shutdown()
        await #expect(throws: StoreError.shutdown) { try await fixture.store.get("k") }
        try await fixture.close()
    }
}

extension StoreConformanceTests {
    /// Every check of the contract, concurrently as the suite runs them, for one test that runs
    /// them all from one task (BlockingCallCheckTests); child tasks keep its executor preference.
    func wholeContract(kind: StoreKind) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.setThenGetReturnsTheValue(kind: kind) }
            group.addTask { try await self.countersIncrementAtomicallyWithinTheirWindow(kind: kind) }
            group.addTask { try await self.concurrentCallsEachGetTheirOwnReply(kind: kind) }
            group.addTask { try await self.binaryValuesRoundTripWhole(kind: kind) }
            group.addTask { try await self.valuesExpireAfterTheirTTL(kind: kind) }
            group.addTask { try await self.setWithoutTTLIsPersistentAndExpireAddsOne(kind: kind) }
            group.addTask { try await self.getAndDeleteHandsTheValueOutOnce(kind: kind) }
            group.addTask { try await self.concurrentGetAndDeleteHasExactlyOneWinner(kind: kind) }
            group.addTask { try await self.takeAppliesItsWritesOnlyWhenTheKeyExists(kind: kind) }
            group.addTask { try await self.applyIfEqualWritesOnlyOverTheExpectedValue(kind: kind) }
            group.addTask { try await self.concurrentSwapsFromOneValueHaveExactlyOneWinner(kind: kind) }
            group.addTask { try await self.concurrentTakesHaveExactlyOneWinnerAndOnlyItsWrites(kind: kind) }
            group.addTask { try await self.indexedTakeAddsItsMembersOnlyWithTheTake(kind: kind) }
            group.addTask { try await self.indexedStepsListTheSetsOverTheirThreshold(kind: kind) }
            group.addTask { try await self.concurrentIndexedTakesLeaveOnlyTheWinnersMember(kind: kind) }
            group.addTask { try await self.applyWritesEverythingAtOnce(kind: kind) }
            group.addTask { try await self.deleteReportsWhetherTheKeyExisted(kind: kind) }
            group.addTask { try await self.setIfAbsentIsALockThatExpires(kind: kind) }
            group.addTask { try await self.concurrentSetIfAbsentHasExactlyOneWinner(kind: kind) }
            group.addTask { try await self.deleteIfEqualReleasesOnlyTheOwnersLock(kind: kind) }
            group.addTask { try await self.setMembershipIndexesSessions(kind: kind) }
            group.addTask { try await self.setTTLIsRenewedByEachAdd(kind: kind) }
            group.addTask { try await self.readingAValueAsASetOrTheReverseIsAWrongTypeError(kind: kind) }
            group.addTask { try await self.getManyReadsEveryKeyInItsPlace(kind: kind) }
            group.addTask { try await self.deleteAnnouncingTakesItsSetInTheSameStep(kind: kind) }
            group.addTask { try await self.deleteAnnouncingLeavesItsEntryWithTheDeletion(kind: kind) }
            group.addTask { try await self.pingAnswersAndShutdownStoresRefuseCalls(kind: kind) }
            try await group.waitForAll()
        }
    }
}
