/// The keys a configuration file may hold. Anything else in the file or in the environment is
/// reported as unknown, so a typo never silently falls back to a default. One value per program:
/// ``relay`` for `relais serve`, ``devProvider`` for `relais dev-provider`.
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

    /// The sections every program shares.
    static let commonLeafKeys: Set<String> = [
        "server.environment", "server.host", "server.port", "server.public_base_url", "server.max_body_bytes",
        "server.drain_timeout",
        "log.level", "log.format",
        "store.kind",
        "store.redis.url", "store.redis.username", "store.redis.password", "store.redis.password_file",
        "store.redis.pool_size", "store.redis.connect_timeout", "store.redis.command_timeout", "store.redis.key_prefix",
        "store.redis.tls.verify", "store.redis.tls.ca_bundle", "store.redis.tls.client_certificate", "store.redis.tls.client_key",
        "store.redis.tls.server_name",
        "store.redis.sentinel.master_name", "store.redis.sentinel.username",
        "store.redis.sentinel.password", "store.redis.sentinel.password_file",
    ]

    static let commonListKeys: Set<String> = ["store.redis.sentinel.nodes"]

    static let relay = ConfigSchema(
        environmentPrefix: "RELAIS_",
        leafKeys: commonLeafKeys.union([
            "http_client.connect_timeout", "http_client.timeout", "http_client.max_response_bytes",
            "http_client.follow_redirects", "http_client.max_redirects", "http_client.max_concurrent_requests",
            "http_client.proxy", "http_client.no_proxy", "http_client.user_agent",
            "http_client.tls.verify", "http_client.tls.ca_bundle", "http_client.tls.client_certificate",
            "http_client.tls.client_key", "http_client.tls.client_key_password", "http_client.tls.client_key_password_file",
            "metrics.enabled",
            "relay.transaction_lifetime", "relay.code_lifetime", "relay.refresh_grace",
            "sessions.idle_timeout", "sessions.lifetime", "sessions.active_key", "signing.active_key",
            "forward_auth.check_session", "forward_auth.subject_header", "forward_auth.client_header", "forward_auth.acr_header",
            "forward_auth.scope_header", "forward_auth.session_header",
            "rate_limit.enabled", "rate_limit.window", "rate_limit.per_ip", "rate_limit.per_client",
            "well_known.apple_app_site_association_file", "well_known.assetlinks_file",
        ]),
        listKeys: commonListKeys.union(["server.trusted_proxies"]),
        keyedSections: [
            "providers": KeyedSection(
                leafKeys: [
                    "preset", "issuer", "discovery", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri",
                    "end_session_endpoint", "client_id", "client_secret", "client_secret_file", "client_auth", "client_key_file",
                    "acr_values", "userinfo_format", "pkce", "require_callback_iss", "post_logout_redirect_uri", "timeout",
                    "jwks_refetch_interval", "backchannel_logout",
                ],
                listKeys: ["scopes", "acr_order", "id_token_algs", "decryption_key_files"]
            ),
            "apps": KeyedSection(
                leafKeys: ["access_token_lifetime"],
                listKeys: ["redirect_uris", "post_logout_redirect_uris", "providers", "scopes", "audiences"]
            ),
            "resource_servers": KeyedSection(leafKeys: ["secret", "secret_file"], listKeys: ["audiences"]),
            "signing.keys": KeyedSection(leafKeys: ["file"]),
            "sessions.keys": KeyedSection(leafKeys: ["secret", "secret_file"]),
        ]
    )

    static let devProvider = ConfigSchema(
        environmentPrefix: "DEV_PROVIDER_",
        leafKeys: commonLeafKeys.union([
            "provider.mode", "provider.identities_file", "provider.signing_key_file", "provider.pairwise_salt",
            "provider.pairwise_salt_file", "provider.code_lifetime", "provider.access_token_lifetime",
            "provider.id_token_lifetime", "provider.session_lifetime", "provider.test_api",
        ]),
        listKeys: commonListKeys,
        keyedSections: [
            "clients": KeyedSection(
                leafKeys: [
                    "secret", "secret_file", "token_endpoint_auth_method", "jwks", "jwks_file", "jwks_uri",
                    "id_token_signed_response_alg", "encryption_alg", "sector_identifier", "faults", "id_token_sid",
                ],
                listKeys: ["redirect_uris", "post_logout_redirect_uris"]
            )
        ]
    )

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
