import Configuration
import RelaisJOSE
import Yams

extension ValueReader {
    mutating func readDevProvider(clientIDs: [String]) -> DevProviderConfiguration {
        var result = DevProviderConfiguration()
        result.server = readServer(defaults: result.server)
        result.log = readLog()
        result.store = readStore(defaults: result.store, environment: result.server.environment)

        var provider = result.provider
        provider.mode = choice("provider.mode", default: provider.mode)
        provider.identitiesFile = text("provider.identities_file") ?? provider.mode.defaultIdentitiesFile
        provider.signingKeyFile = readableFile("provider.signing_key_file")
        provider.pairwiseSalt = secret("provider.pairwise_salt")
        provider.codeLifetime = duration("provider.code_lifetime") ?? provider.codeLifetime
        provider.accessTokenLifetime = duration("provider.access_token_lifetime") ?? provider.accessTokenLifetime
        provider.idTokenLifetime = duration("provider.id_token_lifetime") ?? provider.idTokenLifetime
        provider.sessionLifetime = duration("provider.session_lifetime") ?? provider.sessionLifetime
        provider.testAPI = boolean("provider.test_api") ?? provider.testAPI
        result.provider = provider

        result.identities = readIdentities(path: provider.identitiesFile, mode: provider.mode)
        result.clients = clientIDs.map { readClient(id: $0, mode: provider.mode) }
        if result.clients.isEmpty {
            problem("clients", "register at least one client (clients.<client_id>.redirect_uris)")
        }
        return result
    }

    private mutating func readClient(id: String, mode: DevProviderConfiguration.Mode) -> DevProviderConfiguration.Client {
        let base = "clients.\(id)"
        var client = DevProviderConfiguration.Client(id: id)
        client.secret = secret("\(base).secret")
        client.redirectURIs = list("\(base).redirect_uris") ?? []
        if client.redirectURIs.isEmpty { problem("\(base).redirect_uris", "list at least one redirect URI") }
        for uri in client.redirectURIs where !Self.isAbsoluteURI(uri) {
            problem("\(base).redirect_uris", "'\(uri)' is not an absolute URI without a fragment")
        }
        client.postLogoutRedirectURIs = list("\(base).post_logout_redirect_uris") ?? []
        for uri in client.postLogoutRedirectURIs where !Self.isAbsoluteURI(uri) {
            problem("\(base).post_logout_redirect_uris", "'\(uri)' is not an absolute URI without a fragment")
        }
        client.authentication = choice("\(base).token_endpoint_auth_method", default: client.authentication)
        client.sectorIdentifier = text("\(base).sector_identifier") ?? id
        client.idTokenSessionID = boolean("\(base).id_token_sid") ?? client.idTokenSessionID
        client.scopes = list("\(base).scopes")
        for scope in client.scopes ?? [] where mode.scopeCatalogue[scope] == nil {
            problem("\(base).scopes", "'\(scope)' is not a scope of the \(mode.rawValue) catalogue")
        }
        client.faults = text("\(base).faults").map { $0.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty } } ?? []

        if let raw = text("\(base).id_token_signed_response_alg") {
            switch raw {
            case "ES256": client.idTokenAlgorithm = .es256
            case "RS256": client.idTokenAlgorithm = .rs256
            default: problem("\(base).id_token_signed_response_alg", "expected ES256 or RS256, got '\(raw)'")
            }
        }
        if let raw = text("\(base).encryption_alg") {
            switch raw {
            case "RSA-OAEP": client.encryptionAlgorithm = .rsaOAEP
            case "RSA-OAEP-256": client.encryptionAlgorithm = .rsaOAEP256
            case "ECDH-ES": client.encryptionAlgorithm = .ecdhES
            default: problem("\(base).encryption_alg", "expected RSA-OAEP, RSA-OAEP-256 or ECDH-ES, got '\(raw)'")
            }
        }

        let inlineJWKS = text("\(base).jwks")
        let jwksFile = text("\(base).jwks_file")
        client.jwksURI = text("\(base).jwks_uri")
        if [inlineJWKS != nil, jwksFile != nil, client.jwksURI != nil].filter({ $0 }).count > 1 {
            problem("\(base).jwks", "set one of jwks, jwks_file and jwks_uri")
        }
        var jwksText = inlineJWKS
        if let jwksFile {
            switch ConfigurationLoader.readFile(jwksFile) {
            case .success(let contents): jwksText = contents
            case .failure(let failure): problem("\(base).jwks_file", failure.message)
            }
        }
        if let jwksText {
            do {
                let set = try JWKSet(json: Array(jwksText.utf8))
                if set.keys.contains(where: \.isPrivate) {
                    problem("\(base).jwks", "holds a private key: register only the client's public keys")
                } else {
                    client.jwks = set
                }
            } catch {
                problem("\(base).jwks", "not a usable JWK set: \(error)")
            }
        }
        if let uri = client.jwksURI, !Self.isAbsoluteURI(uri) { problem("\(base).jwks_uri", "'\(uri)' is not an absolute URI") }

        switch client.authentication {
        case .clientSecretPost:
            if client.secret == nil { problem("\(base).secret", "client_secret_post needs a secret (or secret_file)") }
        case .privateKeyJWT:
            if client.jwks == nil && client.jwksURI == nil { problem("\(base).jwks", "private_key_jwt needs the client's public keys (jwks, jwks_file or jwks_uri)") }
        }
        if mode == .v1 && client.secret == nil {
            problem("\(base).secret", "mode v1 signs id_tokens with the client secret: set secret (or secret_file)")
        }
        if mode == .fcplus && client.jwks == nil && client.jwksURI == nil {
            problem("\(base).jwks", "mode fcplus encrypts to the client's public key: set jwks, jwks_file or jwks_uri")
        }
        if let secret = client.secret, mode == .v1, secret.utf8.count < 32 {
            problem("\(base).secret", "mode v1 uses the secret as an HS256 key: it needs at least 32 bytes")
        }
        return client
    }

    static func isAbsoluteURI(_ uri: String) -> Bool {
        guard let colon = uri.firstIndex(of: ":"), colon != uri.startIndex, !uri.contains("#") else { return false }
        let scheme = uri[..<colon]
        return scheme.first!.isLetter && scheme.allSatisfy { $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }
            && uri.count > scheme.count + 1
    }

    private mutating func readIdentities(path: String, mode: DevProviderConfiguration.Mode) -> [TestIdentity] {
        let key = "provider.identities_file"
        let text: String
        switch ConfigurationLoader.readFile(path) {
        case .success(let contents): text = contents
        case .failure(let failure):
            problem(key, failure.message)
            return []
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            problem(key, "\(path) is not valid YAML: \(ConfigSource.yamlProblem(error))")
            return []
        }
        guard case .mapping(let people)? = root, !people.isEmpty else {
            problem(key, "\(path) must map identity ids to their claims")
            return []
        }
        var identities: [TestIdentity] = []
        for (idNode, claimsNode) in people {
            let id = idNode.string ?? ""
            guard case .mapping(let claimNodes) = claimsNode else {
                problem(key, "\(path): identity '\(id)' must be a mapping of claims")
                continue
            }
            var claims: [String: String] = [:]
            for (nameNode, valueNode) in claimNodes {
                guard let name = nameNode.string, TestIdentity.knownClaims(for: mode).contains(name), case .scalar(let scalar) = valueNode else {
                    problem(key, "\(path): identity '\(id)' has an unknown or non-text claim '\(nameNode.string ?? "?")'")
                    continue
                }
                claims[name] = scalar.string
            }
            for name in TestIdentity.requiredClaims(for: mode) where claims[name] == nil {
                problem(key, "\(path): identity '\(id)' lacks '\(name)'")
            }
            if let birthdate = claims["birthdate"], !Self.isISODate(birthdate) {
                problem(key, "\(path): identity '\(id)' birthdate must be YYYY-MM-DD")
            }
            if let gender = claims["gender"], !["male", "female"].contains(gender) {
                problem(key, "\(path): identity '\(id)' gender must be male or female")
            }
            if let siret = claims["siret"], siret.utf8.count != 14 || !siret.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
                problem(key, "\(path): identity '\(id)' siret must be 14 digits")
            }
            if let acr = claims["acr"], !DevProviderConfiguration.proConnectLevels.contains(acr) {
                problem(key, "\(path): identity '\(id)' acr must be one of \(DevProviderConfiguration.proConnectLevels.joined(separator: ", "))")
            }
            identities.append(TestIdentity(id: id, claims: claims))
        }
        return identities
    }

    private static func isISODate(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return false }
        return bytes.enumerated().allSatisfy { $0.offset == 4 || $0.offset == 7 || (0x30...0x39).contains($0.element) }
    }
}
