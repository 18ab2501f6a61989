/// `resource_servers.<id>`: the APIs that may call `/introspect`.
extension ValueReader {
    mutating func readResourceServer(id: String, environment: RelaisConfiguration.Environment) -> ResourceServerSettings {
        let base = "resource_servers.\(id)"
        let secret = secret("\(base).secret") ?? ""
        if secret.utf8.count < 16 { problem("\(base).secret", "set a secret of at least 16 bytes (secret or secret_file)") }
        let audiences = list("\(base).audiences") ?? []
        // As for /auth: without it, this API would learn that any app's token, minted for any other
        // API, is active (a confused deputy), a convenience only in development.
        if environment == .production, audiences.isEmpty {
            problem(
                "\(base).audiences", "is empty: /introspect would answer active for any app's access token, whichever API it was minted for; list the audiences this API accepts")
        }
        return ResourceServerSettings(id: id, secret: secret, audiences: audiences)
    }
}
