import Synchronization

/// A bounded in-process memory of values that cannot change under their key (a verified token, an
/// opened identity: each key is a hash of the thing itself), kept until its own expiry. When full, expired entries go first; if that is not enough it starts over, so a burst of
/// distinct keys only costs the work the cache would have saved.
final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Entry {
        var value: Value
        var expiresAt: Double
    }

    private let entries = Mutex<[Key: Entry]>([:])
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The value under `key` unless it expired by `now` (seconds since 1970).
    func get(_ key: Key, now: Double) -> Value? {
        entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard entry.expiresAt > now else {
                entries[key] = nil
                return nil
            }
            return entry.value
        }
    }

    func put(_ key: Key, _ value: Value, expiresAt: Double, now: Double) {
        entries.withLock { entries in
            if entries.count >= capacity {
                entries = entries.filter { $0.value.expiresAt > now }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[key] = Entry(value: value, expiresAt: expiresAt)
        }
    }

    var count: Int { entries.withLock { $0.count } }
}
