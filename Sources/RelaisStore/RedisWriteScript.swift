/// Several store writes as one atomic step: one Lua script, which Redis runs whole, so the writes
/// land together or not at all. `take` also reads and deletes a key in the same step, and writes
/// nothing when that key is absent; `claim` sets a key that must be absent, and writes nothing when
/// it exists; `ifeq` writes only when a key holds an expected value.
enum RedisWriteScript {
    /// The writes, as both scripts end: KEYS from `first` on, each with three arguments from
    /// ARGV[a] on: `s` or `d`, the value, the TTL in milliseconds ('' for none).
    static let writesLoop = """
        for i = first, #KEYS do
          if ARGV[a] == 's' then
            if ARGV[a + 2] == '' then redis.call('SET', KEYS[i], ARGV[a + 1])
            else redis.call('SET', KEYS[i], ARGV[a + 1], 'PX', ARGV[a + 2]) end
          else
            redis.call('DEL', KEYS[i])
          end
          a = a + 3
        end
        """

    /// `ifeq` puts the expected value before the writes' arguments, `claim` the mark and its TTL.
    static let source = """
        local first = 1
        local taken = 1
        local a = 2
        if ARGV[1] == 'take' then
          taken = redis.call('GET', KEYS[1])
          if not taken then return false end
          redis.call('DEL', KEYS[1])
          first = 2
        elseif ARGV[1] == 'claim' then
          for i = 1, #KEYS do
            if redis.call('EXISTS', KEYS[i]) == 1 and (i == 1 or ARGV[4 + 3 * (i - 2)] == 's') then return false end
          end
          redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
          taken = ARGV[2]
          first = 2
          a = 4
        elseif ARGV[1] == 'ifeq' then
          if redis.call('GET', KEYS[1]) ~= ARGV[2] then return false end
          first = 2
          a = 3
        end
        \(writesLoop)
        return taken
        """
    /// Sent with every call: made once.
    static let sourceBytes = Array(source.utf8)

    /// What the script does before its writes.
    enum Guard {
        case none
        /// Reads and deletes the key; nothing is written when it is absent.
        case take(String)
        /// Sets the key to the mark for the TTL; nothing is written when it, or a key set by the writes, exists.
        case claim(String, mark: [UInt8], ttl: Duration)
        /// Writes only when the key holds this value.
        case ifEqual(String, [UInt8])
    }

    /// The EVAL command for `writes` behind `guarding`.
    static func arguments(_ guarding: Guard, _ writes: [StoreWrite], prefixed: (String) -> [UInt8]) -> [[UInt8]] {
        let bytes = { (text: String) in Array(text.utf8) }
        var keys = writes.map(\.key)
        var mode = [bytes("apply")]
        switch guarding {
        case .none: break
        case .take(let key):
            keys.insert(key, at: 0)
            mode = [bytes("take")]
        case .claim(let key, let mark, let ttl):
            keys.insert(key, at: 0)
            mode = [bytes("claim"), mark, bytes(String(ttl.storeMilliseconds))]
        case .ifEqual(let key, let expected):
            keys.insert(key, at: 0)
            mode = [bytes("ifeq"), expected]
        }
        var arguments = [bytes("EVAL"), sourceBytes, bytes(String(keys.count))] + keys.map(prefixed)
        arguments += mode
        arguments += encoded(writes)
        return arguments
    }

    /// Each write as the scripts read it: three arguments.
    static func encoded(_ writes: [StoreWrite]) -> [[UInt8]] {
        var arguments: [[UInt8]] = []
        arguments.reserveCapacity(3 * writes.count)
        for write in writes {
            switch write {
            case .set(_, let value, let ttl): arguments += [Array("s".utf8), value, Array((ttl.map { String($0.storeMilliseconds) } ?? "").utf8)]
            case .delete: arguments += [Array("d".utf8), [], []]
            }
        }
        return arguments
    }
}

/// ``KeyValueStore/once(_:applying:indexing:)`` on one node: the set keys' kinds are checked
/// first (a wrong one is answered with its position in KEYS, before anything changes), then the
/// guard: a taken key is read (absent: nothing changes), a claimed key and the keys the writes
/// set must be absent (one present: nothing changes). Then the members are added, the key deleted (taken) or set (claimed) and the
/// writes applied. The reply: the value (a claim: its mark), each set's size, then each set's
/// members when it holds more than that set's listing threshold (null otherwise).
enum RedisIndexedTakeScript {
    /// ARGV: `take` or `claim`, the mark and its TTL in milliseconds ('' for a take), the number of
    /// sets n; for each set its member, TTL in milliseconds and listing threshold ('' for none); then the writes as
    /// ``RedisWriteScript`` encodes them. KEYS: the guarded key, the n sets, the writes' keys.
    static let source = """
        local n = tonumber(ARGV[4])
        for i = 2, n + 1 do
          local kind = redis.call('TYPE', KEYS[i]).ok
          if kind ~= 'none' and kind ~= 'set' then return i end
        end
        local claim = ARGV[1] == 'claim'
        local taken
        if claim then
          if redis.call('EXISTS', KEYS[1]) == 1 then return false end
          local w = 5 + 3 * n
          for i = n + 2, #KEYS do
            if ARGV[w] == 's' and redis.call('EXISTS', KEYS[i]) == 1 then return false end
            w = w + 3
          end
          taken = ARGV[2]
        else
          taken = redis.call('GET', KEYS[1])
          if not taken then return false end
        end
        local reply = {taken}
        local a = 5
        for i = 2, n + 1 do
          redis.call('SADD', KEYS[i], ARGV[a])
          if ARGV[a + 1] ~= '' then redis.call('PEXPIRE', KEYS[i], ARGV[a + 1]) end
          local size = redis.call('SCARD', KEYS[i])
          reply[i] = size
          if ARGV[a + 2] ~= '' and size > tonumber(ARGV[a + 2]) then reply[n + i] = redis.call('SMEMBERS', KEYS[i]) else reply[n + i] = false end
          a = a + 3
        end
        if claim then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) else redis.call('DEL', KEYS[1]) end
        local first = n + 2
        \(RedisWriteScript.writesLoop)
        return reply
        """
    /// Sent with every call: made once.
    static let sourceBytes = Array(source.utf8)

    static func arguments(_ guarded: OneTimeKey, _ writes: [StoreWrite], _ memberships: [SetMembership], prefixed: (String) -> [UInt8]) -> [[UInt8]] {
        let bytes = { (text: String) in Array(text.utf8) }
        let keys = [guarded.key] + memberships.map(\.key) + writes.map(\.key)
        var arguments = [bytes("EVAL"), sourceBytes, bytes(String(keys.count))] + keys.map(prefixed)
        switch guarded {
        case .take: arguments += [bytes("take"), [], []]
        case .claim(_, let mark, let ttl): arguments += [bytes("claim"), mark, bytes(String(ttl.storeMilliseconds))]
        }
        arguments.append(bytes(String(memberships.count)))
        for membership in memberships {
            arguments += [
                bytes(membership.member), bytes(membership.ttl.map { String($0.storeMilliseconds) } ?? ""),
                bytes(membership.listedAbove.map(String.init) ?? ""),
            ]
        }
        arguments += RedisWriteScript.encoded(writes)
        return arguments
    }

    /// The script's reply, read: nil when the key was absent.
    static func outcome(_ reply: RedisReply, _ memberships: [SetMembership]) throws -> IndexedTake? {
        switch reply {
        case .null: return nil
        case .integer(let position) where position >= 2 && Int(position) - 2 < memberships.count:
            throw StoreError.wrongType(key: memberships[Int(position) - 2].key)
        case .array(let items):
            let n = memberships.count
            guard case .string(let value)? = items.first, items.count == 2 * n + 1 else { break }
            let sizes = items[1..<(n + 1)].compactMap { item -> Int? in
                if case .integer(let size) = item { Int(size) } else { nil }
            }
            let listed = items[(n + 1)...].compactMap { item -> Set<String>?? in
                switch item {
                case .null: .some(nil)
                case .array(let members): .some(RedisReply.stringSet(members))
                default: nil
                }
            }
            guard sizes.count == n, listed.count == n else { break }
            return IndexedTake(value: value, setSizes: sizes, listed: listed)
        default: break
        }
        throw StoreError.commandFailed(reason: "unexpected reply to an indexed take")
    }
}

/// Reading hiredis replies: anything but the expected shape is a failed command.
extension RedisReply {
    func expectOK() throws {
        guard case .status("OK") = self else { throw StoreError.commandFailed(reason: "unexpected reply") }
    }

    func integer() throws -> Int64 {
        guard case .integer(let value) = self else { throw StoreError.commandFailed(reason: "expected an integer reply") }
        return value
    }

    /// The strings of an array reply (SMEMBERS, a script's list of members), as a set.
    static func stringSet(_ items: [RedisReply]) -> Set<String> {
        Set(
            items.compactMap { item in
                if case .string(let value) = item { return String(decoding: value, as: UTF8.self) }
                return nil
            })
    }

    func optionalBytes() throws -> [UInt8]? {
        switch self {
        case .string(let value): return value
        case .null: return nil
        default: throw StoreError.commandFailed(reason: "unexpected reply")
        }
    }
}
