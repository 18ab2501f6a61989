import Synchronization

/// A bounded in-process memory of values that cannot change under their key (a verified token, an
/// opened identity: each key is a hash of the thing itself), kept until its own expiry.
///
/// Bounded in bytes, not entries: each value is weighed when it is put (its approximate heap
/// size), and when the total passes `maxBytes` the oldest entries go first. Expired entries are
/// also swept every `sweepInterval` seconds of the callers' clock, so a cache that stops filling
/// shrinks back instead of keeping dead entries until it is full.
final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Entry {
        var value: Value
        var expiresAt: Double
        var bytes: Int
        var sequence: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Insertion order for eviction; an item whose sequence no longer matches its entry is stale
        /// (the entry was replaced or removed) and is skipped.
        var order: [(key: Key, sequence: UInt64)] = []
        var head = 0
        var bytes = 0
        var nextSequence: UInt64 = 0
        var nextSweep = -Double.infinity

        mutating func remove(_ key: Key) {
            if let entry = entries.removeValue(forKey: key) { bytes -= entry.bytes }
        }
    }

    /// What one entry costs beyond its value: the dictionary slot, the order slot, the key.
    /// The dictionary keeps between 4/3 and 8/3 slots per entry (it grows by doubling past 3/4 full);
    /// the order list up to three items per entry, counting the copy made when it is compacted.
    static var entryOverhead: Int { (MemoryLayout<Key>.stride + MemoryLayout<Entry>.stride) * 8 / 3 + (MemoryLayout<Key>.stride + 8) * 3 }

    private let state = Mutex(State())
    let maxBytes: Int
    let sweepInterval: Double

    init(maxBytes: Int, sweepInterval: Double = 30) {
        self.maxBytes = maxBytes
        self.sweepInterval = sweepInterval
    }

    /// The value under `key` unless it expired by `now` (seconds since 1970).
    func get(_ key: Key, now: Double) -> Value? {
        state.withLock { state in
            guard let entry = state.entries[key] else { return nil }
            guard entry.expiresAt > now else {
                state.remove(key)
                return nil
            }
            return entry.value
        }
    }

    /// - Parameter bytes: the value's approximate heap size; a value larger than the whole cache
    ///   is not kept.
    func put(_ key: Key, _ value: Value, bytes: Int, expiresAt: Double, now: Double) {
        let cost = bytes + Self.entryOverhead
        state.withLock { state in
            if now >= state.nextSweep {
                for (candidate, entry) in state.entries where entry.expiresAt <= now { state.remove(candidate) }
                state.nextSweep = now + sweepInterval
            }
            state.remove(key)
            guard cost <= maxBytes else { return }
            while state.bytes + cost > maxBytes, state.head < state.order.count {
                let oldest = state.order[state.head]
                state.head += 1
                if state.entries[oldest.key]?.sequence == oldest.sequence { state.remove(oldest.key) }
            }
            state.nextSequence += 1
            state.entries[key] = Entry(value: value, expiresAt: expiresAt, bytes: cost, sequence: state.nextSequence)
            state.order.append((key, state.nextSequence))
            state.bytes += cost
            // Consumed and stale order items (removed, replaced or expired entries) are dropped once
            // they are the majority, so the order list stays proportional to the live entries.
            if state.order.count - state.head > 2 * state.entries.count + 64 || (state.head > 64 && state.head * 2 > state.order.count) {
                let live = state.entries
                state.order = state.order[state.head...].filter { live[$0.key]?.sequence == $0.sequence }
                state.head = 0
            }
        }
    }

    func remove(_ key: Key) { state.withLock { $0.remove(key) } }

    func removeAll() {
        state.withLock { state in
            state.entries.removeAll()
            state.order.removeAll()
            state.head = 0
            state.bytes = 0
        }
    }

    var count: Int { state.withLock { $0.entries.count } }
    /// Slots of the eviction order, consumed ones included (their bound is tested).
    var orderSlots: Int { state.withLock { $0.order.count } }
    /// The weight of what is kept, entry overheads included.
    var bytes: Int { state.withLock { $0.bytes } }
}
