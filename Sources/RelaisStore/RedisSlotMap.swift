/// Redis Cluster's key → slot → master mapping.
///
/// A key's slot is CRC16 (XMODEM) of the key modulo 16384, or of its hash tag: the text between
/// the first `{` and the next `}`, when not empty. Relais gives every key of one session the
/// session's tag, so each multi-key step lands on one node.
struct RedisSlotMap: Sendable, Equatable {
    static let slotCount = 16384

    /// For each slot, an index into `masters`; `unassigned` when no master serves it.
    private var owners: [UInt16]
    private(set) var masters: [RedisConfiguration.Node]
    /// Every replica the map names, to ask for a new map when the masters are gone.
    private(set) var replicas: [RedisConfiguration.Node]
    private static let unassigned = UInt16.max

    init() {
        owners = Array(repeating: Self.unassigned, count: Self.slotCount)
        masters = []
        replicas = []
    }

    func master(of slot: Int) -> RedisConfiguration.Node? {
        let index = owners[slot]
        return index == Self.unassigned ? nil : masters[Int(index)]
    }

    /// How many slots have a master: 16384 in a healthy cluster.
    var coveredSlots: Int { owners.lazy.filter { $0 != Self.unassigned }.count }

    /// Records a `MOVED` answer: `slot` is now served by `node`.
    mutating func assign(_ slot: Int, to node: RedisConfiguration.Node) {
        guard (0..<Self.slotCount).contains(slot) else { return }
        if let index = masters.firstIndex(of: node) {
            owners[slot] = UInt16(index)
        } else {
            masters.append(node)
            owners[slot] = UInt16(masters.count - 1)
        }
    }

    // MARK: - Hash slots

    static func slot(of key: some Collection<UInt8>) -> Int {
        Int(crc16(hashed(key)) % UInt16(slotCount))
    }

    /// The part of the key that is hashed: its hash tag when it has a non-empty one.
    private static func hashed<Key: Collection<UInt8>>(_ key: Key) -> Key.SubSequence {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        let afterOpen = key.index(after: open)
        guard let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen else { return key[...] }
        return key[afterOpen..<close]
    }

    private static let crcTable: [UInt16] = (0..<256).map { byte in
        var crc = UInt16(byte) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }

    /// CRC-16/XMODEM (polynomial 0x1021, initial value 0), the one Redis Cluster uses.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes { crc = (crc << 8) ^ crcTable[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)] }
        return crc
    }

    // MARK: - CLUSTER SLOTS

    /// Reads a `CLUSTER SLOTS` reply: ranges of slots, each with its master then its replicas as
    /// `[host, port, id, …]`. An empty or `?` host means the node that answered (`askedHost`).
    init(clusterSlots reply: RedisReply, askedHost: String) throws(StoreError) {
        self.init()
        guard case .array(let ranges) = reply else { throw .commandFailed(reason: "unexpected reply to CLUSTER SLOTS") }
        for range in ranges {
            guard case .array(let fields) = range, fields.count >= 3, case .integer(let first) = fields[0], case .integer(let last) = fields[1],
                first >= 0, first <= last, last < Self.slotCount
            else { throw .commandFailed(reason: "unexpected slot range in CLUSTER SLOTS") }
            let nodes = try fields[2...].map { field throws(StoreError) in try Self.node(field, askedHost: askedHost) }
            let master = nodes[0]
            let index: Int
            if let known = masters.firstIndex(of: master) {
                index = known
            } else {
                masters.append(master)
                index = masters.count - 1
            }
            for slot in Int(first)...Int(last) { owners[slot] = UInt16(index) }
            for replica in nodes.dropFirst() where !replicas.contains(replica) { replicas.append(replica) }
        }
    }

    private static func node(_ field: RedisReply, askedHost: String) throws(StoreError) -> RedisConfiguration.Node {
        guard case .array(let parts) = field, parts.count >= 2, case .string(let hostBytes) = parts[0], case .integer(let port) = parts[1],
            (1...65535).contains(port)
        else { throw .commandFailed(reason: "unexpected node in CLUSTER SLOTS") }
        let host = String(decoding: hostBytes, as: UTF8.self)
        return RedisConfiguration.Node(host: host.isEmpty || host == "?" ? askedHost : host, port: Int(port))
    }
}

/// A cluster's answer that the key lives elsewhere.
enum RedisRedirection: Equatable {
    /// The slot moved for good: update the map.
    case moved(slot: Int, to: RedisConfiguration.Node)
    /// The slot is migrating: ask this node once, after `ASKING`, and keep the map.
    case ask(slot: Int, to: RedisConfiguration.Node)

    /// `MOVED 3999 127.0.0.1:6381` or `ASK 3999 [::1]:6381`; nil for any other error. A node that
    /// does not know its own address answers `:6381`: the host is then the one that answered.
    init?(error message: String, answeredBy host: String) {
        let parts = message.split(separator: " ")
        guard parts.count == 3, let slot = Int(parts[1]), (0..<RedisSlotMap.slotCount).contains(slot) else { return nil }
        let address = parts[2].hasPrefix(":") ? (host.contains(":") ? "[\(host)]" : host) + parts[2] : String(parts[2])
        guard let node = RedisConfiguration.Node(parsing: address, defaultPort: 0) else { return nil }
        switch parts[0] {
        case "MOVED": self = .moved(slot: slot, to: node)
        case "ASK": self = .ask(slot: slot, to: node)
        default: return nil
        }
    }
}
