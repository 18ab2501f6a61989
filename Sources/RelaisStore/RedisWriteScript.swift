/// Several store writes as one atomic step: one Lua script, which Redis runs whole, so the writes
/// land together or not at all. `take` also reads and deletes a key in the same step, and writes
/// nothing when that key is absent; `ifeq` writes only when a key holds an expected value.
enum RedisWriteScript {
    /// Each write is three arguments: `s` or `d`, the value, the TTL in milliseconds ('' for none).
    /// `ifeq` puts the expected value before them.
    static let source = """
        local first = 1
        local taken = 1
        local a = 2
        if ARGV[1] == 'take' then
          taken = redis.call('GET', KEYS[1])
          if not taken then return false end
          redis.call('DEL', KEYS[1])
          first = 2
        elseif ARGV[1] == 'ifeq' then
          if redis.call('GET', KEYS[1]) ~= ARGV[2] then return false end
          first = 2
          a = 3
        end
        for i = first, #KEYS do
          if ARGV[a] == 's' then
            if ARGV[a + 2] == '' then redis.call('SET', KEYS[i], ARGV[a + 1])
            else redis.call('SET', KEYS[i], ARGV[a + 1], 'PX', ARGV[a + 2]) end
          else
            redis.call('DEL', KEYS[i])
          end
          a = a + 3
        end
        return taken
        """

    /// What the script does before its writes.
    enum Guard {
        case none
        /// Reads and deletes the key; nothing is written when it is absent.
        case take(String)
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
        case .ifEqual(let key, let expected):
            keys.insert(key, at: 0)
            mode = [bytes("ifeq"), expected]
        }
        var arguments = [bytes("EVAL"), bytes(source), bytes(String(keys.count))] + keys.map(prefixed)
        arguments += mode
        for write in writes {
            switch write {
            case .set(_, let value, let ttl): arguments += [bytes("s"), value, bytes(ttl.map { String($0.storeMilliseconds) } ?? "")]
            case .delete: arguments += [bytes("d"), [], []]
            }
        }
        return arguments
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

    func optionalBytes() throws -> [UInt8]? {
        switch self {
        case .string(let value): return value
        case .null: return nil
        default: throw StoreError.commandFailed(reason: "unexpected reply")
        }
    }
}
