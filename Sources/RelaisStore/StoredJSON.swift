import FoundationEssentials

/// Records kept in the store as JSON (readable with `redis-cli GET`), for Codable record types.
public enum StoredJSON {
    public static func encode<Value: Encodable>(_ value: Value) -> [UInt8] {
        (try? Array(JSONEncoder().encode(value))) ?? []
    }

    /// Nil for a missing key or a value that does not decode (a record of an older shape).
    public static func decode<Value: Decodable>(_ type: Value.Type, _ bytes: [UInt8]?) -> Value? {
        guard let bytes else { return nil }
        return try? JSONDecoder().decode(type, from: Data(bytes))
    }
}
