import Configuration

/// The keys a configuration file may hold. Anything else in the file or in the environment is
/// reported as unknown, so a typo never silently falls back to a default. One value per program:
/// ``relay`` for `relais serve`, ``devProvider`` for `relais dev-provider`, each derived from the
/// program's reader (``survey(environmentPrefix:keyedSections:read:)``): a key is spelled once,
/// where it is read. Readers therefore ask for every key unconditionally and decide afterwards.
struct ConfigSchema: Sendable {
    /// Entries of a section keyed by id (`clients.my-app.secret`): the keys each entry may hold.
    struct KeyedSection: Sendable {
        var leafKeys: Set<String>
        var listKeys: Set<String> = []
    }

    /// Environment variables that override keys start with this (`RELAIS_`).
    let environmentPrefix: String
    /// Leaf keys (dotted paths) that take a single value.
    let leafKeys: Set<String>
    /// Leaf keys that take a list of values.
    let listKeys: Set<String>
    /// Sections keyed by id, with the keys each entry may hold (nil: entries are not checked).
    let keyedSections: [String: KeyedSection?]

    /// Sections that group leaf keys.
    var sections: Set<String> {
        var result = Set<String>()
        for key in leafKeys.union(listKeys) {
            var components = key.split(separator: ".").dropLast()
            while !components.isEmpty {
                result.insert(components.joined(separator: "."))
                components = components.dropLast()
            }
        }
        return result
    }

    /// The schema of a program, derived from its reader: the reader runs once over an empty
    /// configuration, with one placeholder entry in each keyed section, and every key it asks for is
    /// a known key.
    static func survey(environmentPrefix: String, keyedSections: [String], read: (inout ValueReader, (String) -> [String]) -> Void) -> ConfigSchema {
        let placeholder = "\u{0}entry"
        var reader = ValueReader(config: ConfigReader(provider: InMemoryProvider(values: [:])))
        read(&reader, { keyedSections.contains($0) ? [placeholder] : [] })
        var leafKeys = reader.asked.leaf, listKeys = reader.asked.list
        var sections: [String: KeyedSection?] = [:]
        for section in keyedSections {
            let prefix = section + "." + placeholder + "."
            func take(_ keys: inout Set<String>) -> Set<String> {
                let inSection = keys.filter { $0.hasPrefix(prefix) }
                keys.subtract(inSection)
                return Set(inSection.map { String($0.dropFirst(prefix.count)) })
            }
            sections[section] = KeyedSection(leafKeys: take(&leafKeys), listKeys: take(&listKeys))
        }
        return ConfigSchema(environmentPrefix: environmentPrefix, leafKeys: leafKeys, listKeys: listKeys, keyedSections: sections)
    }

    /// `relais serve`'s keys: whatever `readRelay` asks for.
    static let relay = survey(environmentPrefix: "RELAIS_", keyedSections: ["providers", "apps", "resource_servers", "signing.keys", "sessions.keys"]) {
        reader, ids in _ = reader.readRelay(ids: ids)
    }

    /// `relais dev-provider`'s keys: whatever `readDevProvider` asks for.
    static let devProvider = survey(environmentPrefix: "DEV_PROVIDER_", keyedSections: ["clients"]) { reader, ids in
        _ = reader.readDevProvider(clientIDs: ids("clients"))
    }

    /// The environment variable that overrides a key: the prefix + the key with dots as underscores, uppercased.
    func environmentName(for key: String) -> String {
        environmentPrefix + key.replacingDotsWithUnderscores().uppercased()
    }

    /// The closest known key, when one is close enough to be the intended one.
    func suggestion(for path: String) -> String? {
        Self.closest(to: path, among: leafKeys.union(listKeys).union(sections).union(keyedSections.keys))
    }

    static func closest(to path: String, among candidates: Set<String>) -> String? {
        let scored = candidates.map { ($0, editDistance(path, $0)) }.min { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }
        guard let (best, distance) = scored, distance <= max(2, path.count / 4) else { return nil }
        return best
    }

    static func editDistance(_ lhs: String, _ rhs: String) -> Int {
        let a = Array(lhs.utf8)
        let b = Array(rhs.utf8)
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}

extension String {
    func replacingDotsWithUnderscores() -> String {
        String(map { $0 == "." ? "_" : $0 })
    }
}
