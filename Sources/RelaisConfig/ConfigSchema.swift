/// The keys Relais understands. Anything else in the file or in `RELAIS_*` variables is reported as
/// unknown, so a typo never silently falls back to a default.
enum ConfigSchema {
    /// Leaf keys (dotted paths) that take a single value.
    static let leafKeys: Set<String> = [
        "server.environment", "server.host", "server.port", "server.public_base_url", "server.max_body_bytes",
        "server.drain_timeout",
        "log.level", "log.format",
        "store.kind",
        "store.redis.url", "store.redis.username", "store.redis.password", "store.redis.password_file",
        "store.redis.pool_size", "store.redis.connect_timeout", "store.redis.command_timeout", "store.redis.key_prefix",
        "http_client.connect_timeout", "http_client.timeout", "http_client.max_response_bytes",
        "http_client.follow_redirects", "http_client.max_redirects", "http_client.max_concurrent_requests",
        "http_client.proxy", "http_client.no_proxy", "http_client.user_agent",
        "http_client.tls.verify", "http_client.tls.ca_bundle", "http_client.tls.client_certificate",
        "http_client.tls.client_key", "http_client.tls.client_key_password", "http_client.tls.client_key_password_file",
        "metrics.enabled",
    ]

    /// Sections whose content the next components (providers, apps) define; only their shape is checked here.
    static let openSections: Set<String> = ["providers", "apps"]

    /// Sections that group leaf keys.
    static let sections: Set<String> = {
        var result = Set<String>()
        for key in leafKeys {
            var components = key.split(separator: ".").dropLast()
            while !components.isEmpty {
                result.insert(components.joined(separator: "."))
                components = components.dropLast()
            }
        }
        return result
    }()

    static func isUnderOpenSection(_ path: String) -> Bool {
        openSections.contains { path == $0 || path.hasPrefix($0 + ".") }
    }

    /// The environment variable that overrides a key: `RELAIS_` + the key with dots as underscores, uppercased.
    static func environmentName(for key: String) -> String {
        ConfigurationLoader.environmentPrefix + key.replacingDotsWithUnderscores().uppercased()
    }

    /// The closest known key, when one is close enough to be the intended one.
    static func suggestion(for path: String) -> String? {
        let candidates = leafKeys.union(sections).union(openSections)
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
