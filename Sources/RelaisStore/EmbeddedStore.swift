public import RelaisClock
import Synchronization

/// An in-process store with the same API and TTL semantics as ``RedisStore``.
///
/// For `make demo`, the development provider and single-instance deployments: nothing survives a
/// restart and nothing is shared between processes. Expired entries are invisible at once and
/// swept in batches, so memory follows the live data.
public final class EmbeddedStore: KeyValueStore {
    fileprivate enum Value {
        case bytes([UInt8])
        case set(Set<String>)
    }

    fileprivate struct Entry {
        var value: Value
        var expiresAt: ContinuousClock.Instant?

        func isLive(at now: ContinuousClock.Instant) -> Bool {
            expiresAt.map { now < $0 } ?? true
        }
    }

    fileprivate struct State {
        var entries: [String: Entry] = [:]
        var writesSinceSweep = 0
        var isShutdown = false
    }

    private let state = Mutex(State())
    private let listeners = AnnouncementListeners()
    /// TTLs count on this clock: tests move a ``ManualClock`` instead of waiting.
    private let clock: any RelaisClock
    /// Writes between two full sweeps of expired entries.
    private let sweepInterval: Int

    public init(sweepInterval: Int = 4096, clock: any RelaisClock = SystemClock()) {
        self.sweepInterval = max(1, sweepInterval)
        self.clock = clock
    }

    public func set(_ key: String, _ value: [UInt8], ttl: Duration?) async throws {
        try write { state, now in
            state.entries[key] = Entry(value: .bytes(value), expiresAt: ttl.map { now + $0 })
        }
    }

    public func get(_ key: String) async throws -> [UInt8]? {
        try read { state, now in try bytes(state.live(key, now), key: key) }
    }

    public func getMany(_ keys: [String]) async throws -> [[UInt8]?] {
        try read { state, now in try keys.map { key in try bytes(state.live(key, now), key: key) } }
    }

    public func getAndDelete(_ key: String) async throws -> [UInt8]? {
        try write { state, now in
            let value = try bytes(state.live(key, now), key: key)
            state.entries[key] = nil
            return value
        }
    }

    public func delete(_ key: String) async throws -> Bool {
        try write { state, now in state.entries.removeValue(forKey: key)?.isLive(at: now) ?? false }
    }

    /// One process: the announcement reaches the listeners before this returns.
    public func deleteAnnouncing(_ key: String, _ message: String, taking set: String?, leaving left: SetEntry?) async throws -> (existed: Bool, taken: Set<String>) {
        let (existed, taken) = try write { state, now -> (Bool, Set<String>) in
            var taken: Set<String> = []
            if let set, let entry = state.live(set, now) {
                guard case .set(let members) = entry.value else { throw StoreError.wrongType(key: set) }
                taken = members
            }
            if let set { state.entries[set] = nil }
            let existed = state.entries.removeValue(forKey: key)?.isLive(at: now) ?? false
            // Clean-up: a value of another kind where the set should be stays as it is.
            if let left { _ = try? state.remove(left.member, from: left.key, now) }
            return (existed, taken)
        }
        if existed { for listener in listeners.all { listener.onMessage(message) } }
        return (existed, taken)
    }

    public func listen(_ listener: AnnouncementListener) {
        listener.deliverInProcess()
        listeners.add(listener)
    }

    public func setIfAbsent(_ key: String, _ value: [UInt8], ttl: Duration) async throws -> Bool {
        try write { state, now in
            guard state.live(key, now) == nil else { return false }
            state.entries[key] = Entry(value: .bytes(value), expiresAt: now + ttl)
            return true
        }
    }

    public func increment(_ key: String, window: Duration) async throws -> Int {
        try write { state, now in
            let current = state.live(key, now)
            var count = 0
            if case .bytes(let bytes)? = current?.value {
                guard let parsed = Int(String(decoding: bytes, as: UTF8.self)) else { throw StoreError.wrongType(key: key) }
                count = parsed
            } else if current != nil {
                throw StoreError.wrongType(key: key)
            }
            count += 1
            state.entries[key] = Entry(value: .bytes(Array(String(count).utf8)), expiresAt: current?.expiresAt ?? now + window)
            return count
        }
    }

    public func deleteIfEqual(_ key: String, _ value: [UInt8]) async throws -> Bool {
        try write { state, now in
            guard case .bytes(let current)? = state.live(key, now)?.value, current == value else { return false }
            state.entries[key] = nil
            return true
        }
    }

    public func expire(_ key: String, ttl: Duration) async throws -> Bool {
        try write { state, now in
            guard state.live(key, now) != nil else { return false }
            state.entries[key]?.expiresAt = now + ttl
            return true
        }
    }

    public func timeToLive(_ key: String) async throws -> StoreTTL {
        try read { state, now in
            guard let entry = state.live(key, now) else { return .missing }
            guard let expiresAt = entry.expiresAt else { return .persistent }
            return .expiresIn(expiresAt - now)
        }
    }

    @discardableResult
    public func setAdd(_ key: String, member: String, ttl: Duration?) async throws -> Int {
        try write { state, now in try state.add(SetMembership(key, member: member, ttl: ttl), now) }
    }

    public func setRemove(_ key: String, member: String) async throws -> Bool {
        try write { state, now in try state.remove(member, from: key, now) }
    }

    public func setMembers(_ key: String) async throws -> Set<String> {
        try read { state, now in
            guard let entry = state.live(key, now) else { return [] }
            guard case .set(let members) = entry.value else { throw StoreError.wrongType(key: key) }
            return members
        }
    }

    public func take(_ key: String, applying writes: [StoreWrite]) async throws -> [UInt8]? {
        try write { state, now in
            guard let value = try bytes(state.live(key, now), key: key) else { return nil }
            state.entries[key] = nil
            state.apply(writes, now)
            return value
        }
    }

    public func once(_ guarded: OneTimeKey, applying writes: [StoreWrite], indexing memberships: [SetMembership]) async throws -> IndexedTake? {
        try write { state, now in
            for membership in memberships {
                if let entry = state.live(membership.key, now), case .bytes = entry.value { throw StoreError.wrongType(key: membership.key) }
            }
            let value: [UInt8]
            switch guarded {
            case .take(let key):
                guard let taken = try bytes(state.live(key, now), key: key) else { return nil }
                value = taken
            case .claim(let key, let mark, _):
                guard state.live(key, now) == nil, !writes.contains(where: { if case .set(let written, _, _) = $0 { state.live(written, now) != nil } else { false } }) else {
                    return nil
                }
                value = mark
            }
            let sizes = try memberships.map { try state.add($0, now) }
            let listed = zip(memberships, sizes).map { membership, size -> Set<String>? in
                guard let above = membership.listedAbove, size > above, case .set(let members)? = state.live(membership.key, now)?.value else { return nil }
                return members
            }
            switch guarded {
            case .take(let key): state.entries[key] = nil
            case .claim(let key, let mark, let ttl): state.entries[key] = Entry(value: .bytes(mark), expiresAt: now + ttl)
            }
            state.apply(writes, now)
            return IndexedTake(value: value, setSizes: sizes, listed: listed)
        }
    }

    public func apply(_ writes: [StoreWrite]) async throws {
        try write { state, now in state.apply(writes, now) }
    }

    public func apply(_ writes: [StoreWrite], ifEqual key: String, _ expected: [UInt8]) async throws -> Bool {
        try write { state, now in
            guard try bytes(state.live(key, now), key: key) == expected else { return false }
            state.apply(writes, now)
            return true
        }
    }

    /// The keys that have not expired, for tests and the operator's eye.
    public func liveKeys() throws -> [String] {
        try read { state, now in state.entries.filter { $0.value.isLive(at: now) }.map(\.key).sorted() }
    }

    public func ping() async throws {
        try read { _, _ in () }
    }

    public func shutdown() async throws {
        state.withLock { state in
            state.isShutdown = true
            state.entries.removeAll()
        }
    }

    // MARK: - Internals

    private func bytes(_ entry: Entry?, key: String) throws -> [UInt8]? {
        guard let entry else { return nil }
        guard case .bytes(let value) = entry.value else { throw StoreError.wrongType(key: key) }
        return value
    }

    private func read<Result>(_ body: (inout State, ContinuousClock.Instant) throws -> Result) throws -> Result {
        let now = clock.instant
        return try state.withLock { state in
            guard !state.isShutdown else { throw StoreError.shutdown }
            return try body(&state, now)
        }
    }

    private func write<Result>(_ body: (inout State, ContinuousClock.Instant) throws -> Result) throws -> Result {
        let now = clock.instant
        return try state.withLock { state in
            guard !state.isShutdown else { throw StoreError.shutdown }
            let result = try body(&state, now)
            state.writesSinceSweep += 1
            if state.writesSinceSweep >= sweepInterval {
                state.writesSinceSweep = 0
                state.entries = state.entries.filter { $0.value.isLive(at: now) }
            }
            return result
        }
    }
}

extension EmbeddedStore.State {
    fileprivate mutating func apply(_ writes: [StoreWrite], _ now: ContinuousClock.Instant) {
        for write in writes {
            switch write {
            case .set(let key, let value, let ttl): entries[key] = EmbeddedStore.Entry(value: .bytes(value), expiresAt: ttl.map { now + $0 })
            case .delete(let key): entries[key] = nil
            }
        }
    }

    /// Removes the member; true when it was there. Like Redis, a set that becomes empty no longer exists.
    fileprivate mutating func remove(_ member: String, from key: String, _ now: ContinuousClock.Instant) throws -> Bool {
        guard var entry = live(key, now) else { return false }
        guard case .set(var members) = entry.value else { throw StoreError.wrongType(key: key) }
        let removed = members.remove(member) != nil
        entry.value = .set(members)
        entries[key] = members.isEmpty ? nil : entry
        return removed
    }

    /// Adds the member; returns the set's size.
    fileprivate mutating func add(_ membership: SetMembership, _ now: ContinuousClock.Instant) throws -> Int {
        var entry = live(membership.key, now) ?? EmbeddedStore.Entry(value: .set([]), expiresAt: nil)
        guard case .set(var members) = entry.value else { throw StoreError.wrongType(key: membership.key) }
        members.insert(membership.member)
        entry.value = .set(members)
        if let ttl = membership.ttl { entry.expiresAt = now + ttl }
        entries[membership.key] = entry
        return members.count
    }

    /// The entry when present and not expired; an expired entry is dropped on the way.
    fileprivate mutating func live(_ key: String, _ now: ContinuousClock.Instant) -> EmbeddedStore.Entry? {
        guard let entry = entries[key] else { return nil }
        guard entry.isLive(at: now) else {
            entries[key] = nil
            return nil
        }
        return entry
    }
}
