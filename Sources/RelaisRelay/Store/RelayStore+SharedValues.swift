import RelaisStore

/// Values every instance on one store shares, written once by whichever comes first.
extension RelayStore {
    /// A value shared by every instance on this store, written once by whichever comes first
    /// (development keys, the security events' hash key). Nil when the store kept nothing.
    func sharedValue(_ name: SharedValue, proposing value: [UInt8]) async throws -> [UInt8]? {
        _ = try await store.setIfAbsent(name.key, value, ttl: .seconds(10 * 365 * 86400))
        return try await store.get(name.key)
    }

    /// ``sharedValue(_:proposing:)`` for a value costly to make (an RSA key): made only when the
    /// store holds none.
    func sharedValue(_ name: SharedValue, making value: () throws -> [UInt8]) async throws -> [UInt8]? {
        if let stored = try await store.get(name.key) { return stored }
        return try await sharedValue(name, proposing: try value())
    }

    enum SharedValue {
        case signingKey, rsaSigningKey, sessionKey, eventHashKey

        var key: String {
            switch self {
            case .signingKey: Key.signingKey
            case .rsaSigningKey: Key.rsaSigningKey
            case .sessionKey: Key.sessionKey
            case .eventHashKey: Key.eventHashKey
            }
        }
    }
}
