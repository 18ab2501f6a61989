/// The storage Relais needs, and no more: short-lived values with TTLs, one-time reads, locks and
/// small sets (user → sessions). Two implementations pass one conformance suite: ``RedisStore``
/// for production and several instances, ``EmbeddedStore`` for `make demo` and single-node use.
///
/// Values are raw bytes; callers encode. Keys are UTF-8 strings chosen by Relais, never by users.
public protocol KeyValueStore: Sendable {
    /// Stores `value`, replacing any previous value; with a `ttl`, the key disappears after it.
    func set(_ key: String, _ value: [UInt8], ttl: Duration?) async throws
    func get(_ key: String) async throws -> [UInt8]?
    /// The values of `keys`, in their order (nil where missing), as ``get(_:)`` reads them one by
    /// one, but in few round trips: on one Redis server, pipelined in batches. Not one atomic step:
    /// each value is as it was when read. For reading many records at once (a person's sessions).
    func getMany(_ keys: [String]) async throws -> [[UInt8]?]
    /// Reads and removes in one atomic step: of several concurrent callers, exactly one gets the value.
    func getAndDelete(_ key: String) async throws -> [UInt8]?
    /// Returns whether the key existed.
    @discardableResult
    func delete(_ key: String) async throws -> Bool
    /// Stores only when the key is absent (a lock); returns whether it stored.
    func setIfAbsent(_ key: String, _ value: [UInt8], ttl: Duration) async throws -> Bool
    /// Deletes only when the current value equals `value` (releasing a lock one still owns).
    @discardableResult
    func deleteIfEqual(_ key: String, _ value: [UInt8]) async throws -> Bool
    /// Sets a new TTL on an existing key; returns false when the key does not exist.
    @discardableResult
    func expire(_ key: String, ttl: Duration) async throws -> Bool
    /// Remaining lifetime: nil when the key is missing, `.zero`-free `Duration` otherwise;
    /// `StoreTTL.persistent` when it never expires.
    func timeToLive(_ key: String) async throws -> StoreTTL
    /// Adds one to the counter at `key` and returns the new count; a counter created by this call
    /// lives for `window` (a fixed-window rate limit), later increments keep its deadline.
    func increment(_ key: String, window: Duration) async throws -> Int
    /// Adds `member` to the set at `key`; with a `ttl`, the whole set's lifetime is reset to it.
    /// Returns how many members the set has now.
    @discardableResult
    func setAdd(_ key: String, member: String, ttl: Duration?) async throws -> Int
    @discardableResult
    func setRemove(_ key: String, member: String) async throws -> Bool
    func setMembers(_ key: String) async throws -> Set<String>
    /// One atomic step: when `key` exists, deletes it, applies every write and returns the value it
    /// held; otherwise changes nothing and returns nil. Of concurrent callers exactly one applies its
    /// writes, and a failure leaves either all of them or none. On Redis Cluster every key must
    /// share one hash tag (`{…}`), so the step runs on one node.
    func take(_ key: String, applying writes: [StoreWrite]) async throws -> [UInt8]?
    /// ``take(_:applying:)`` for a record that must be found through indexes (a session through
    /// its person's), guarded by a one-time key (``OneTimeKey``): a key to take (a stored code),
    /// or a key to claim (a used-mark, written only when absent). Each membership's member is added
    /// to its set too. Where every key lives on one node (one Redis server, or one cluster hash
    /// slot), one atomic step, one round trip: when the guard holds, the members are added, the
    /// key taken or claimed and the writes applied; otherwise nothing changes. Across cluster nodes
    /// the members are added first and the guarded step runs after, so a record is never written
    /// before its indexes; when the guard turns out not to hold, the members (new ones: this call
    /// is for records just created) are removed again, best effort, since readers skip members
    /// whose record is missing; but not for a claim whose records exist: the caller that wrote
    /// them added the same members (one code redeemed twice at once names one session). Returns the taken value (a claim: its mark) and, in `indexing`
    /// order, each set's size after the addition, and the members of each set that then holds more
    /// than its ``SetMembership/listedAbove``, read in the same step on one node (a person over
    /// their limit of sessions, without a round trip to list them); nil when the guard did not hold. A set key
    /// holding another kind of value is refused (``StoreError/wrongType(key:)``) before anything changes.
    func once(_ guarded: OneTimeKey, applying writes: [StoreWrite], indexing memberships: [SetMembership]) async throws -> IndexedTake?
    /// Applies every write or none, in one atomic step (same hash-tag rule as ``take(_:applying:)``).
    func apply(_ writes: [StoreWrite]) async throws
    /// A compare-and-set: when `key` holds exactly `expected`, applies every write in the same atomic
    /// step and returns true; otherwise changes nothing and returns false (also when `key` is
    /// absent). Same hash-tag rule as ``take(_:applying:)``.
    func apply(_ writes: [StoreWrite], ifEqual key: String, _ expected: [UInt8]) async throws -> Bool
    /// Deletes `key` and, when it existed, announces `message` to every ``AnnouncementListener`` of
    /// every instance, in one atomic step (deleted exactly when announced). With `set`, takes that
    /// set in the same step: deletes it, whether or not `key` existed, and returns its members (a
    /// session's record and the device sessions it approved, in one round trip). On Redis Cluster
    /// `set` must share `key`'s hash tag. A `set` holding another kind of value is refused
    /// (``StoreError/wrongType(key:)``) before anything changes. With `entry`, the member then
    /// leaves its set (a session leaves its person's index), whether or not `key` existed: in the
    /// same step on one Redis server, just after on a cluster, where the set lives on another node.
    /// That removal is clean-up, never a failure: a set holding another kind of value, or a cluster
    /// node that does not answer, leaves the entry where it was. Returns whether `key` existed.
    func deleteAnnouncing(_ key: String, _ message: String, taking set: String?, leaving entry: SetEntry?) async throws -> (existed: Bool, taken: Set<String>)
    /// Delivers the announcements of every instance to `listener` from now on (on Redis, through
    /// a subscription that proves itself every ``AnnouncementListener/proofInterval``).
    func listen(_ listener: AnnouncementListener)
    /// Succeeds when the store answers; throws ``StoreError/storeUnavailable(reason:)`` otherwise.
    func ping() async throws
    /// Releases connections and threads; later calls fail.
    func shutdown() async throws
}

extension KeyValueStore {
    /// ``deleteAnnouncing(_:_:taking:leaving:)`` taking no set and leaving none.
    public func deleteAnnouncing(_ key: String, _ message: String) async throws -> Bool {
        try await deleteAnnouncing(key, message, taking: nil, leaving: nil).existed
    }

    /// ``deleteAnnouncing(_:_:taking:leaving:)`` leaving no set.
    public func deleteAnnouncing(_ key: String, _ message: String, taking set: String?) async throws -> (existed: Bool, taken: Set<String>) {
        try await deleteAnnouncing(key, message, taking: set, leaving: nil)
    }

    /// ``once(_:applying:indexing:)`` taking `key`.
    public func take(_ key: String, applying writes: [StoreWrite], indexing memberships: [SetMembership]) async throws -> IndexedTake? {
        try await once(.take(key), applying: writes, indexing: memberships)
    }
}

/// The key that lets a step run once: of concurrent callers exactly one sees its guard hold.
public enum OneTimeKey: Sendable, Equatable {
    /// The key must hold a value, which the step reads and deletes (a stored code, a device code).
    case take(String)
    /// The key must be absent, and so must every key the step sets (it creates them); the step
    /// sets the key to `mark` for `ttl`. A used-mark: what it guards was carried by the caller,
    /// sealed, rather than stored, and a record it created is never overwritten by a second claim,
    /// even once the mark has gone.
    case claim(String, mark: [UInt8], ttl: Duration)

    public var key: String {
        switch self {
        case .take(let key), .claim(let key, _, _): key
        }
    }
}

/// One change inside ``KeyValueStore/take(_:applying:)`` or ``KeyValueStore/apply(_:)``.
public enum StoreWrite: Sendable, Equatable {
    /// Stores a value, replacing any previous one; with a `ttl`, the key disappears after it.
    case set(_ key: String, _ value: [UInt8], ttl: Duration?)
    case delete(_ key: String)

    public var key: String {
        switch self {
        case .set(let key, _, _), .delete(let key): key
        }
    }
}

/// A member to add to a set, whose lifetime is then reset to `ttl` (as ``KeyValueStore/setAdd(_:member:ttl:)``).
public struct SetMembership: Sendable, Equatable {
    public var key: String
    public var member: String
    public var ttl: Duration?
    /// When the set then holds more members than this, ``KeyValueStore/once(_:applying:indexing:)``
    /// also returns them (``IndexedTake/listed``).
    public var listedAbove: Int?

    public init(_ key: String, member: String, ttl: Duration?, listedAbove: Int? = nil) {
        (self.key, self.member, self.ttl, self.listedAbove) = (key, member, ttl, listedAbove)
    }
}

/// A member of a set, to remove (``KeyValueStore/deleteAnnouncing(_:_:taking:leaving:)``).
public struct SetEntry: Sendable, Equatable {
    public var key: String
    public var member: String

    public init(_ key: String, member: String) {
        (self.key, self.member) = (key, member)
    }
}

/// What ``KeyValueStore/once(_:applying:indexing:)`` took (a claim: its mark), and each set's size after it.
public struct IndexedTake: Sendable, Equatable {
    public var value: [UInt8]
    public var setSizes: [Int]
    /// In the same order, each set's members when it holds more than its ``SetMembership/listedAbove``; nil otherwise.
    public var listed: [Set<String>?]

    public init(value: [UInt8], setSizes: [Int], listed: [Set<String>?]? = nil) {
        (self.value, self.setSizes, self.listed) = (value, setSizes, listed ?? setSizes.map { _ in nil })
    }
}

public enum StoreTTL: Sendable, Equatable {
    case missing
    case persistent
    case expiresIn(Duration)
}

/// Store failures. Codes are stable and listed in docs/errors.md.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The store could not be reached or did not answer within the command timeout. Nothing was
    /// changed by the failed call as far as Relais can tell; callers answer 503 and may retry.
    case storeUnavailable(reason: String)
    /// The key holds a value of another kind (a set read as a value, or the reverse).
    case wrongType(key: String)
    /// The store answered with an error Relais did not expect.
    case commandFailed(reason: String)
    /// The store was shut down.
    case shutdown

    public var code: String {
        switch self {
        case .storeUnavailable: "store_unavailable"
        case .wrongType: "store_wrong_type"
        case .commandFailed: "store_command_failed"
        case .shutdown: "store_shutdown"
        }
    }

    public var description: String {
        switch self {
        case .storeUnavailable(let reason): "\(code): \(reason)"
        case .wrongType(let key): "\(code): key \(key) holds another kind of value"
        case .commandFailed(let reason): "\(code): \(reason)"
        case .shutdown: "\(code): the store is shut down"
        }
    }
}

extension Duration {
    /// Whole milliseconds, at least 1: Redis refuses a zero or negative expiry.
    var storeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(1, seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}
