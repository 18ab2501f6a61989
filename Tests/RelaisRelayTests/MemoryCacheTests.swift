@testable import RelaisRelay
import Testing

/// The in-process cache behind verified tokens and opened identities: expiry and its bound.
@Suite struct MemoryCacheTests {
    @Test func entriesAreServedUntilTheirOwnExpiry() {
        let cache = MemoryCache<String, Int>(capacity: 10)
        cache.put("a", 1, expiresAt: 100, now: 0)
        cache.put("b", 2, expiresAt: 200, now: 0)
        #expect(cache.get("a", now: 99.9) == 1)
        #expect(cache.get("a", now: 100) == nil)  // expiry is exclusive
        #expect(cache.get("b", now: 150) == 2)
        #expect(cache.get("missing", now: 0) == nil)
        #expect(cache.count == 1)  // the expired entry went on its lookup
    }

    @Test func whenFullExpiredEntriesGoFirstThenEverything() {
        let cache = MemoryCache<Int, Int>(capacity: 4)
        for key in 0..<2 { cache.put(key, key, expiresAt: 10, now: 0) }
        for key in 2..<4 { cache.put(key, key, expiresAt: 1000, now: 0) }
        // Full at now = 50: the two expired entries make room, the live ones stay.
        cache.put(4, 4, expiresAt: 1000, now: 50)
        #expect(cache.count == 3)
        #expect(cache.get(2, now: 50) == 2 && cache.get(3, now: 50) == 3 && cache.get(4, now: 50) == 4)
        // Full of live entries: the cache starts over rather than growing.
        cache.put(5, 5, expiresAt: 1000, now: 50)
        #expect(cache.count == 4)
        cache.put(6, 6, expiresAt: 1000, now: 50)
        #expect(cache.count == 1)
        #expect(cache.get(6, now: 50) == 6 && cache.get(2, now: 50) == nil)
    }

    @Test func aReplacedEntryTakesTheNewValueAndExpiry() {
        let cache = MemoryCache<String, String>(capacity: 2)
        cache.put("k", "old", expiresAt: 10, now: 0)
        cache.put("k", "new", expiresAt: 20, now: 0)
        #expect(cache.get("k", now: 15) == "new")
        #expect(cache.count == 1)
    }
}
