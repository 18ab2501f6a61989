public import Tracing

/// A store whose every call is a client span, child of the request's span: `store get`,
/// `store take`… with `db.system.name` and `db.operation.name`. Keys are never recorded: they name
/// sessions and token hashes. A failure sets the span's status to the store's error code only.
///
/// Used only when tracing is on, so a relay without traces pays nothing per call.
public struct TracedStore: KeyValueStore {
    /// The wrapped store (the relay asks Redis for its persistence settings through it).
    public let base: any KeyValueStore
    let tracer: any Tracer
    let system: String

    /// - Parameter system: `db.system.name` of the spans: `redis` or `relais.embedded`.
    public init(_ base: any KeyValueStore, tracer: any Tracer, system: String) {
        self.base = base
        self.tracer = tracer
        self.system = system
    }

    private func traced<Result>(_ operation: String, writes: Int? = nil, _ body: () async throws -> Result) async throws -> Result {
        let span = tracer.startSpan("store \(operation)", context: ServiceContext.current ?? .topLevel, ofKind: .client)
        span.attributes["db.system.name"] = system
        span.attributes["db.operation.name"] = operation
        if let writes { span.attributes["relais.store.writes"] = writes }
        defer { span.end() }
        do {
            return try await body()
        } catch {
            span.setStatus(SpanStatus(code: .error, message: (error as? StoreError)?.code ?? "cancelled"))
            throw error
        }
    }

    public func set(_ key: String, _ value: [UInt8], ttl: Duration?) async throws { try await traced("set") { try await base.set(key, value, ttl: ttl) } }
    public func get(_ key: String) async throws -> [UInt8]? { try await traced("get") { try await base.get(key) } }
    public func getMany(_ keys: [String]) async throws -> [[UInt8]?] { try await traced("get_many") { try await base.getMany(keys) } }
    public func getAndDelete(_ key: String) async throws -> [UInt8]? { try await traced("get_and_delete") { try await base.getAndDelete(key) } }
    public func delete(_ key: String) async throws -> Bool { try await traced("delete") { try await base.delete(key) } }
    public func setIfAbsent(_ key: String, _ value: [UInt8], ttl: Duration) async throws -> Bool {
        try await traced("set_if_absent") { try await base.setIfAbsent(key, value, ttl: ttl) }
    }
    public func deleteIfEqual(_ key: String, _ value: [UInt8]) async throws -> Bool {
        try await traced("delete_if_equal") { try await base.deleteIfEqual(key, value) }
    }
    public func expire(_ key: String, ttl: Duration) async throws -> Bool { try await traced("expire") { try await base.expire(key, ttl: ttl) } }
    public func timeToLive(_ key: String) async throws -> StoreTTL { try await traced("ttl") { try await base.timeToLive(key) } }
    public func increment(_ key: String, window: Duration) async throws -> Int { try await traced("increment") { try await base.increment(key, window: window) } }
    @discardableResult
    public func setAdd(_ key: String, member: String, ttl: Duration?) async throws -> Int {
        try await traced("set_add") { try await base.setAdd(key, member: member, ttl: ttl) }
    }
    public func setRemove(_ key: String, member: String) async throws -> Bool {
        try await traced("set_remove") { try await base.setRemove(key, member: member) }
    }
    public func setMembers(_ key: String) async throws -> Set<String> { try await traced("set_members") { try await base.setMembers(key) } }
    public func take(_ key: String, applying writes: [StoreWrite]) async throws -> [UInt8]? {
        try await traced("take", writes: writes.count) { try await base.take(key, applying: writes) }
    }
    public func once(_ guarded: OneTimeKey, applying writes: [StoreWrite], indexing memberships: [SetMembership]) async throws -> IndexedTake? {
        let operation = if case .take = guarded { "take_indexing" } else { "claim_indexing" }
        return try await traced(operation, writes: writes.count + memberships.count) { try await base.once(guarded, applying: writes, indexing: memberships) }
    }
    public func apply(_ writes: [StoreWrite]) async throws { try await traced("apply", writes: writes.count) { try await base.apply(writes) } }
    public func apply(_ writes: [StoreWrite], ifEqual key: String, _ expected: [UInt8]) async throws -> Bool {
        try await traced("apply_if_equal", writes: writes.count) { try await base.apply(writes, ifEqual: key, expected) }
    }
    public func deleteAnnouncing(_ key: String, _ message: String, taking set: String?, leaving entry: SetEntry?) async throws -> (existed: Bool, taken: Set<String>) {
        try await traced("delete_announcing") { try await base.deleteAnnouncing(key, message, taking: set, leaving: entry) }
    }
    public func listen(_ listener: AnnouncementListener) { base.listen(listener) }
    public func ping() async throws { try await traced("ping") { try await base.ping() } }
    public func shutdown() async throws { try await base.shutdown() }
}
