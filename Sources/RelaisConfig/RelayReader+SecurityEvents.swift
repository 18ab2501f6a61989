extension ValueReader {
    mutating func readSecurityEvents() -> RelaisConfiguration.SecurityEvents {
        var events = RelaisConfiguration.SecurityEvents()
        events.enabled = boolean("security_events.enabled") ?? events.enabled
        switch text("security_events.output") {
        case nil, "stdout": events.output = .standardOutput
        case "stderr": events.output = .standardError
        case let path? where path.hasPrefix("/"): events.output = .file(path)
        case let other?: problem("security_events.output", "expected stdout, stderr or an absolute file path; got '\(other)'")
        }
        if let key = secret("security_events.hash_key") {
            if key.utf8.count < 32 { problem("security_events.hash_key", "use at least 32 random bytes: with fewer, a sub could be found from its hash") }
            events.hashKey = Array(key.utf8)
        }
        return events
    }
}
