import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// The in-process cache behind verified tokens, opened identities and userinfo bodies: expiry, and
/// its bound in bytes.
@Suite(.tags(.fast)) struct MemoryCacheTests {
    /// Room for `entries` values of `bytes` each.
    private func cache<Key>(_ key: Key.Type, entries: Int, bytes: Int = 100) -> MemoryCache<Key, Int> {
        MemoryCache(maxBytes: entries * (bytes + MemoryCache<Key, Int>.entryOverhead))
    }

    @Test func entriesAreServedUntilTheirOwnExpiry() {
        let cache = cache(String.self, entries: 10)
        cache.put("a", 1, bytes: 100, expiresAt: 100, now: 0)
        cache.put("b", 2, bytes: 100, expiresAt: 200, now: 0)
        #expect(cache.get("a", now: 99.9) == 1)
        #expect(cache.get("a", now: 100) == nil)  // expiry is exclusive
        #expect(cache.get("b", now: 150) == 2)
        #expect(cache.get("missing", now: 0) == nil)
        #expect(cache.count == 1)  // the expired entry went on its lookup
    }

    @Test func theBoundIsInBytesAndTheOldestEntriesGoFirst() {
        let cache = cache(Int.self, entries: 4)
        for key in 0..<4 { cache.put(key, key, bytes: 100, expiresAt: 1000, now: 0) }
        #expect(cache.count == 4)
        cache.put(4, 4, bytes: 100, expiresAt: 1000, now: 0)
        #expect(cache.count == 4)
        #expect(cache.get(0, now: 0) == nil)
        #expect((1...4).allSatisfy { cache.get($0, now: 0) == $0 })
        // One value three times as heavy pushes out the three oldest.
        cache.put(5, 5, bytes: 300 + 2 * MemoryCache<Int, Int>.entryOverhead, expiresAt: 1000, now: 0)
        #expect(cache.count == 2)
        #expect(cache.get(4, now: 0) == 4 && cache.get(5, now: 0) == 5)
        #expect(cache.bytes <= cache.maxBytes)
        // A value heavier than the whole cache is not kept, and costs no entry.
        cache.put(6, 6, bytes: cache.maxBytes, expiresAt: 1000, now: 0)
        #expect(cache.get(6, now: 0) == nil)
        #expect(cache.count == 2)
    }

    @Test func expiredEntriesAreSweptWithoutWaitingForTheCacheToFill() {
        let cache = MemoryCache<Int, Int>(maxBytes: 1 << 20, sweepInterval: 30)
        for key in 0..<100 { cache.put(key, key, bytes: 100, expiresAt: 10, now: 0) }
        #expect(cache.count == 100)
        cache.put(1000, 0, bytes: 100, expiresAt: 100, now: 20)  // before the next sweep: kept
        #expect(cache.count == 101)
        cache.put(1001, 0, bytes: 100, expiresAt: 100, now: 31)  // the sweep drops the 100 expired
        #expect(cache.count == 2)
        #expect(cache.bytes == 2 * (100 + MemoryCache<Int, Int>.entryOverhead))
    }

    @Test func aReplacedEntryTakesTheNewValueExpiryAndWeight() {
        let cache = cache(String.self, entries: 2)
        cache.put("k", 1, bytes: 100, expiresAt: 10, now: 0)
        cache.put("k", 2, bytes: 50, expiresAt: 20, now: 0)
        #expect(cache.get("k", now: 15) == 2)
        #expect(cache.count == 1)
        #expect(cache.bytes == 50 + MemoryCache<String, Int>.entryOverhead)
        // The replaced entry's place in the eviction order is gone: filling up evicts "k" once.
        cache.put("a", 3, bytes: 100, expiresAt: 20, now: 0)
        cache.put("b", 4, bytes: 100, expiresAt: 20, now: 0)
        #expect(cache.get("k", now: 0) == nil)
        #expect(cache.get("a", now: 0) == 3 && cache.get("b", now: 0) == 4)
    }

    /// Many distinct keys, far past the bound: the weight never exceeds it and the bookkeeping
    /// stays proportional to what is kept.
    @Test func aLongRunStaysWithinTheBound() {
        let cache = cache(Int.self, entries: 50)
        for key in 0..<20_000 {
            cache.put(key, key, bytes: 100, expiresAt: Double(key % 7 == 0 ? 1 : 1_000_000), now: Double(key) / 100)
            #expect(cache.bytes <= cache.maxBytes)
        }
        #expect(cache.count <= 50)
        #expect(cache.orderSlots <= 2 * cache.count + 130)
        #expect(cache.get(19_998, now: 200) == 19_998)
    }
}
