#if canImport(Security) && !os(Linux)
public import Foundation
import Security

/// The Keychain, as generic passwords of one service, `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`
/// (readable by background refreshes after the first unlock; never in backups restored elsewhere).
/// `errSecInteractionNotAllowed` (before the first unlock, prewarming) is ``RelaisKitErrorCode/storageLocked``.
public struct KeychainStorage: SecureStorage {
    /// `kSecAttrService` of every item.
    public let service: String
    /// A shared access group (an app and its extensions), or nil.
    public let accessGroup: String?

    public init(service: String, accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    private func query(_ key: String) -> [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: key]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    private func failure(_ status: OSStatus, _ action: String) -> RelaisKitError {
        RelaisKitError(status == errSecInteractionNotAllowed ? .storageLocked : .storageFailed, "Keychain \(action): OSStatus \(status)")
    }

    public func read(_ key: String) throws -> Data? {
        var query = query(key)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw failure(status, "read") }
        return item as? Data
    }

    public func write(_ key: String, _ value: Data) throws {
        let attributes: [String: Any] = [kSecValueData as String: value, kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly]
        var status = SecItemUpdate(query(key) as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound { status = SecItemAdd(query(key).merging(attributes) { $1 } as CFDictionary, nil) }
        guard status == errSecSuccess else { throw failure(status, "write") }
    }

    public func delete(_ key: String) throws {
        let status = SecItemDelete(query(key) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw failure(status, "delete") }
    }
}
#endif
