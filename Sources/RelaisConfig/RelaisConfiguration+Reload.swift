extension RelaisConfiguration {
    /// Why `newer` cannot be applied to a process running this configuration at all, or nil.
    ///
    /// The environment is one: a file is checked under its own `server.environment`, and what
    /// development allows (http issuers, generated keys, the development attester) must never
    /// reach a process started in production. It changes only with a restart.
    public func reloadRefusal(of newer: RelaisConfiguration) -> ConfigProblem? {
        guard newer.server.environment != server.environment else { return nil }
        return ConfigProblem(
            "server.environment",
            "the process runs in '\(server.environment.rawValue)' and the file says '\(newer.server.environment.rawValue)': "
                + "the environment changes only with a restart; reload with server.environment: \(server.environment.rawValue)"
        )
    }

    /// What a running process can take from `newer` on a reload: apps, providers, keys, resource
    /// servers, lifetimes, limits (rate limits, body size, store budget), forward-auth, well-known
    /// files, the admin token and security events. What the process was started with stays:
    /// listener, environment, connection timeouts, store connection, outbound client, metrics and
    /// log. The second value names each of those that differs, so the operator hears that it
    /// needs a restart.
    public func reloaded(with newer: RelaisConfiguration) -> (configuration: RelaisConfiguration, needsRestart: [String]) {
        var merged = newer
        var needsRestart: [String] = []
        for index in merged.providers.indices where merged.providers[index].decryptionKeysGenerated {
            if let running = providers.first(where: { $0.id == merged.providers[index].id && $0.decryptionKeysGenerated }) {
                merged.providers[index].decryptionKeys = running.decryptionKeys
            }
        }
        var server = server
        server.maxBodyBytes = newer.server.maxBodyBytes
        server.trustedProxies = newer.server.trustedProxies
        if server != newer.server { needsRestart.append("server") }
        merged.server = server
        var store = store
        store.requestBudget = newer.store.requestBudget
        if store != newer.store { needsRestart.append("store") }
        merged.store = store
        if httpClient != newer.httpClient { needsRestart.append("http_client") }
        merged.httpClient = httpClient
        if metrics != newer.metrics { needsRestart.append("metrics") }
        merged.metrics = metrics
        if log != newer.log { needsRestart.append("log") }
        merged.log = log
        return (merged, needsRestart)
    }
}
