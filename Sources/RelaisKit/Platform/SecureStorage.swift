public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where tokens and the instance key are kept. Reads distinguish "absent" (nil) from "cannot
/// read now": the latter throws ``RelaisKitError`` with ``RelaisKitErrorCode/storageLocked``,
/// and the library never treats it as a sign-out nor deletes anything because of it.
public protocol SecureStorage: Sendable {
    /// The stored value, or nil when there is none.
    func read(_ key: String) throws -> Data?
    func write(_ key: String, _ value: Data) throws
    func delete(_ key: String) throws
}

/// A value per key in memory, for tests and previews. ``isLocked`` plays the locked device.
public final class MemoryStorage: SecureStorage, @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: Data] = [:]
    private var locked = false

    public init() {}

    /// While true, every access throws ``RelaisKitErrorCode/storageLocked``, as a Keychain item
    /// with `AfterFirstUnlock` does before the first unlock.
    public var isLocked: Bool {
        get { lock.locked { locked } }
        set { lock.locked { locked = newValue } }
    }

    public func read(_ key: String) throws -> Data? {
        try lock.locked {
            guard !locked else { throw RelaisKitError(.storageLocked, "the storage is locked") }
            return values[key]
        }
    }

    public func write(_ key: String, _ value: Data) throws {
        try lock.locked {
            guard !locked else { throw RelaisKitError(.storageLocked, "the storage is locked") }
            values[key] = value
        }
    }

    public func delete(_ key: String) throws {
        try lock.locked {
            guard !locked else { throw RelaisKitError(.storageLocked, "the storage is locked") }
            values[key] = nil
        }
    }
}

/// One file per key in a directory of mode 0700, each file 0600, written atomically (a temporary
/// file renamed): for Linux and terminal apps. A directory that exists but cannot be read (its
/// permissions, an encrypted home not mounted yet) reads as locked, never as empty.
public struct FileStorage: SecureStorage {
    /// The directory holding one file per key.
    public let directory: URL

    public init(directory: URL) throws {
        self.directory = directory
        if !FileManager.default.fileExists(atPath: directory.path) {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
    }

    private func path(_ key: String) -> String {
        directory.appendingPathComponent(key.replacingOccurrences(of: "/", with: "_")).path
    }

    public func read(_ key: String) throws -> Data? {
        let path = path(key)
        guard access(directory.path, R_OK | X_OK) == 0 else {
            throw RelaisKitError(.storageLocked, "the store directory \(directory.path) cannot be read now")
        }
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard access(path, R_OK) == 0, let data = FileManager.default.contents(atPath: path) else {
            throw RelaisKitError(.storageLocked, "\(path) cannot be read now")
        }
        return data
    }

    public func write(_ key: String, _ value: Data) throws {
        let path = path(key)
        let temporary = path + ".tmp-\(getpid())-\(CompactJWT.random(bits: 64))"
        guard FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw RelaisKitError(access(directory.path, W_OK) == 0 ? .storageFailed : .storageLocked, "cannot write in \(directory.path)")
        }
        do {
            try value.write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, path) == 0 else { throw RelaisKitError(.storageFailed, "cannot rename into \(path)") }
        } catch {
            unlink(temporary)
            throw error as? RelaisKitError ?? RelaisKitError(.storageFailed, "cannot write \(path): \(error.localizedDescription)")
        }
    }

    public func delete(_ key: String) throws {
        let path = path(key)
        guard FileManager.default.fileExists(atPath: path) else { return }
        guard unlink(path) == 0 else { throw RelaisKitError(.storageFailed, "cannot delete \(path)") }
    }
}

extension NSLock {
    /// `withLock`, which Apple's Foundation has only from iOS 16 and macOS 13.
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
