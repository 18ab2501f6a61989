import Configuration
import RelaisAttest
import RelaisCrypto
import RelaisJOSE

extension ValueReader {
    /// Providers, apps, resource servers, Relais' keys and lifetimes.
    mutating func readRelaySections(into result: inout RelaisConfiguration, ids: (String) -> [String]) {
        let environment = result.server.environment
        result.providers = ids("providers").map { readProvider(id: $0, environment: environment, publicBaseURL: result.server.publicBaseURL) }
        // Development only: a provider that encrypts to Relais (FranceConnect+) and has no
        // decryption_key_files gets a key made for this process, published at /jwks/provider.json,
        // so `make demo` needs no key file. Production refuses such a provider (readProvider).
        for index in result.providers.indices where environment == .development && result.providers[index].decryptionKeys.isEmpty {
            let provider = result.providers[index]
            guard provider.userinfoFormat == .jwe || provider.requireEncryptedIDToken else { continue }
            do {
                let generated = try generateKey(.rs256, nil)
                result.providers[index].decryptionKeys = [try JWK(pem: generated.privateKeyPEM() ?? "", use: "enc")]
                result.providers[index].decryptionKeysGenerated = true
                result.warnings.append(
                    "providers.\(provider.id): no decryption_key_files, so a development key was generated; it changes at each start (production refuses this)"
                )
            } catch {
                problem("providers.\(provider.id).decryption_key_files", "none set, and no development key could be generated: \(error)")
            }
        }
        let providerIDs = result.providers.map(\.id)
        for provider in result.providers {
            guard let stepUp = provider.stepUpProvider else { continue }
            if stepUp == provider.id || !providerIDs.contains(stepUp) {
                problem("providers.\(provider.id).step_up_provider", "'\(stepUp)' is not another configured provider")
            }
        }
        relayDevAttester(into: &result)
        let devAttester = result.relay.devAttester
        result.apps = ids("apps").map { readApp(id: $0, providerIDs: providerIDs, devAttester: devAttester, environment: environment) }
        for app in result.apps {
            for approver in app.deviceGrant?.approvers ?? [] {
                guard let approving = result.apps.first(where: { $0.clientID == approver }) else {
                    problem("apps.\(app.clientID).device_approvers", "'\(approver)' is not a configured app")
                    continue
                }
                // A proof is asked of approvers by default: one that can never make it is a mistake.
                if app.deviceGrant?.approverProof == .dpop, approving.dpop == .off {
                    problem(
                        "apps.\(app.clientID).device_approvers",
                        "'\(approver)' has dpop: off, so it can never approve with a DPoP-bound token; allow DPoP there or set device_approvers_proof: bearer"
                    )
                }
            }
        }
        result.resourceServers = ids("resource_servers").map { readResourceServer(id: $0, environment: environment) }
        result.adminToken = secret("admin.token")
        if let token = result.adminToken, token.utf8.count < 32 { problem("admin.token", "use at least 32 random bytes: it can end anyone's sessions") }
        result.securityEvents = readSecurityEvents()
        // Keys matter once apps get tokens; production never generates its own.
        let needsKeys = environment == .production && !result.apps.isEmpty
        result.keys = readKeys(signingIDs: ids("signing.keys"), sessionIDs: ids("sessions.keys"), required: needsKeys)
        if let active = result.keys.activeSigningKey, result.keys.signingKeys.first(where: { $0.keyID == active })?.keyType == .rsa {
            for app in result.apps where app.idTokenAlgorithm == .es256 {
                problem("apps.\(app.clientID).id_token_signed_response_alg", "ES256 needs an EC P-256 signing.active_key; '\(active)' is RSA")
            }
        }

        var relay = result.relay
        relay.transactionLifetime = duration("relay.transaction_lifetime") ?? relay.transactionLifetime
        relay.codeLifetime = duration("relay.code_lifetime") ?? relay.codeLifetime
        relay.codeFormat = choice("relay.code_format", default: relay.codeFormat)
        relay.refreshGrace = duration("relay.refresh_grace", atMost: .seconds(300)) ?? relay.refreshGrace
        relay.deviceCodeLifetime = duration("relay.device_code_lifetime") ?? relay.deviceCodeLifetime
        relay.devicePollInterval = duration("relay.device_poll_interval") ?? relay.devicePollInterval
        relay.sessionIdleTimeout = duration("sessions.idle_timeout") ?? relay.sessionIdleTimeout
        relay.sessionLifetime = duration("sessions.lifetime") ?? relay.sessionLifetime
        relay.maxSessionsPerSubject = integer("sessions.max_per_subject", in: 1...10_000) ?? relay.maxSessionsPerSubject
        if relay.sessionIdleTimeout > relay.sessionLifetime {
            problem("sessions.idle_timeout", "is longer than sessions.lifetime, which bounds it")
        }
        result.relay = relay

        var forward = result.forwardAuth
        forward.checkSession = boolean("forward_auth.check_session") ?? forward.checkSession
        forward.audiences = list("forward_auth.audiences") ?? forward.audiences
        // Without it, /auth lets through a token minted for any API of any app: a convenience in
        // development, a confused deputy in production.
        if environment == .production, !result.apps.isEmpty, forward.audiences.isEmpty {
            problem(
                "forward_auth.audiences",
                "is empty: /auth would accept any app's access token, whichever API it was minted for; list the audiences the guarded APIs accept"
            )
        }
        for (key, path) in [
            ("subject_header", \ForwardAuthSettings.subjectHeader), ("client_header", \.clientHeader), ("acr_header", \.acrHeader),
            ("scope_header", \.scopeHeader), ("session_header", \.sessionHeader), ("attested_header", \.attestedHeader),
        ] {
            guard let name = text("forward_auth.\(key)") else { continue }
            if name.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) {
                forward[keyPath: path] = name
            } else {
                problem("forward_auth.\(key)", "'\(name)' is not a valid header name (letters, digits and '-')")
            }
        }
        // Each identity header says one thing: two settings naming one header would send both values.
        let names = [forward.subjectHeader, forward.clientHeader, forward.acrHeader, forward.scopeHeader, forward.sessionHeader, forward.attestedHeader, "Cache-Control"]
        if Set(names.map { $0.lowercased() }).count != names.count {
            problem(
                "forward_auth",
                "the identity headers (subject_header, client_header, acr_header, scope_header, session_header, attested_header) must be distinct, and none Cache-Control")
        }
        result.forwardAuth = forward
        result.pages = readPages()

        var memory = result.memory
        for (key, path) in [
            ("verified_tokens", \MemorySettings.verifiedTokens), ("identities", \.identities), ("userinfo_bodies", \.userinfoBodies),
            ("session_liveness", \.sessionLiveness),
        ] {
            memory[keyPath: path] = byteSize("memory.\(key)", atMost: MemorySettings.maxBudget) ?? memory[keyPath: path]
        }
        result.memory = memory

        var limits = result.rateLimit
        limits.enabled = boolean("rate_limit.enabled") ?? limits.enabled
        limits.window = duration("rate_limit.window", atLeast: .seconds(1), wholeSeconds: true) ?? limits.window
        limits.perIP = integer("rate_limit.per_ip", in: 1...1_000_000) ?? limits.perIP
        limits.perClient = integer("rate_limit.per_client", in: 1...100_000_000) ?? limits.perClient
        limits.userCodesPerIP = integer("rate_limit.user_codes_per_ip", in: 1...100_000) ?? limits.userCodesPerIP
        limits.userCodes = integer("rate_limit.user_codes", in: 1...10_000_000) ?? limits.userCodes
        result.rateLimit = limits

        for (key, path) in [("apple_app_site_association_file", \WellKnownSettings.appleAppSiteAssociation), ("assetlinks_file", \.assetLinks)] {
            guard let file = text("well_known.\(key)") else { continue }
            switch ConfigurationLoader.readFile(file) {
            case .success(let contents):
                if JSONValue.parse(Array(contents.utf8)) == nil {
                    problem("well_known.\(key)", "\(file) is not valid JSON")
                } else {
                    result.wellKnown[keyPath: path] = Array(contents.utf8)
                }
            case .failure(let failure):
                problem("well_known.\(key)", failure.message)
            }
        }
    }

    /// `attestation.dev_attester`: on by default in development, refused in production.
    private mutating func relayDevAttester(into result: inout RelaisConfiguration) {
        let development = result.server.environment == .development
        let wanted = boolean("attestation.dev_attester") ?? development
        if wanted && !development {
            problem("attestation.dev_attester", "the development attester accepts any device: it is refused in production")
        }
        result.relay.devAttester = wanted && development
    }

    private mutating func readApp(id: String, providerIDs: [String], devAttester: Bool, environment: RelaisConfiguration.Environment) -> AppSettings {
        let base = "apps.\(id)"
        let redirects = list("\(base).redirect_uris") ?? []
        if redirects.isEmpty { problem("\(base).redirect_uris", "list at least one redirect URI") }
        for uri in redirects {
            if let reason = RedirectURIRules.problem(uri) { problem("\(base).redirect_uris", "'\(uri)': \(reason)") }
        }
        let providers = list("\(base).providers") ?? providerIDs
        for provider in providers where !providerIDs.contains(provider) {
            problem("\(base).providers", "'\(provider)' is not a configured provider (\(providerIDs.joined(separator: ", ")))")
        }
        if providers.isEmpty { problem("\(base).providers", "the app needs at least one provider: configure providers.<id>") }
        let scopes = list("\(base).scopes") ?? ["openid", "profile", "email"]
        if !scopes.contains("openid") { problem("\(base).scopes", "must include openid") }
        var app = AppSettings(clientID: id, redirectURIs: redirects, providers: providers, scopes: scopes)
        app.postLogoutRedirectURIs = list("\(base).post_logout_redirect_uris") ?? []
        for uri in app.postLogoutRedirectURIs {
            if let reason = RedirectURIRules.problem(uri) { problem("\(base).post_logout_redirect_uris", "'\(uri)': \(reason)") }
        }
        app.name = text("\(base).name")
        app.accessTokenLifetime = duration("\(base).access_token_lifetime") ?? app.accessTokenLifetime
        if let alg = text("\(base).id_token_signed_response_alg") {
            if let chosen = AppSettings.IDTokenAlgorithm(rawValue: alg) {
                app.idTokenAlgorithm = chosen
            } else {
                problem("\(base).id_token_signed_response_alg", "expected RS256 (the default) or ES256; got '\(alg)'")
            }
        }
        app.audiences = list("\(base).audiences") ?? app.audiences
        app.dpop = choice("\(base).dpop", default: app.dpop)
        app.dpopNonce = boolean("\(base).dpop_nonce") ?? app.dpopNonce
        app.webTargets = list("\(base).web_targets") ?? []
        for target in app.webTargets { checkURL("\(base).web_targets", target, environment: environment) }
        let approvers = list("\(base).device_approvers")
        let attestedApprovers = boolean("\(base).device_approvers_attested")
        var grant = AppSettings.DeviceGrant()
        grant.approverProof = choice("\(base).device_approvers_proof", default: grant.approverProof)
        let maxAge = duration("\(base).device_approval_max_age")
        grant.approvalMaxAge = maxAge ?? grant.approvalMaxAge
        if boolean("\(base).device_grant") == true {
            grant.approvers = approvers ?? []
            grant.attestedApprovers = attestedApprovers ?? false
            app.deviceGrant = grant
        } else if approvers != nil || attestedApprovers != nil || maxAge != nil || text("\(base).device_approvers_proof") != nil {
            problem("\(base).device_approvers", "set device_grant: true for the app first")
        }
        readAttestation(into: &app, base: base, devAttester: devAttester)
        return app
    }

    private mutating func readAttestation(into app: inout AppSettings, base: String, devAttester: Bool) {
        app.attestation = choice("\(base).attestation", default: app.attestation)
        app.clientAttestationLifetime = duration("\(base).client_attestation_lifetime") ?? app.clientAttestationLifetime

        let appID = text("\(base).apple.app_id")
        let environment = choice("\(base).apple.environment", default: AppAttestVerifier.Environment.production)
        if let appID {
            let parts = appID.split(separator: ".", maxSplits: 1)
            if parts.count == 2, parts[0].count == 10, parts[0].allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) {
                app.apple = AppSettings.AppleAttestation(verifier: AppAttestVerifier(appID: appID, environment: environment))
            } else {
                problem("\(base).apple.app_id", "'\(appID)' is not TEAMID.bundle.id (a 10-character team id, a dot, the bundle id)")
            }
        }

        let package = text("\(base).android.package_name")
        let digests = list("\(base).android.certificate_digests") ?? []
        let level = choice("\(base).android.device_integrity", default: PlayIntegrityPolicy.DeviceLevel.device)
        let maxAge = duration("\(base).android.max_verdict_age")
        let decryptionKey = secret("\(base).android.decryption_key")
        let verificationKey = text("\(base).android.verification_key")
        let serviceAccount = secret("\(base).android.service_account")
        let decodeURL = text("\(base).android.decode_service_url")
        if let package {
            var policy = PlayIntegrityPolicy(packageName: package, certificateDigests: digests)
            policy.deviceIntegrity = level
            policy.maxAge = maxAge ?? policy.maxAge
            if digests.isEmpty { problem("\(base).android.certificate_digests", "list the SHA-256 digests of the app signing certificates (Play Console)") }
            for digest in digests where PlayIntegrityPolicy.normalizedDigest(digest) == nil {
                problem("\(base).android.certificate_digests", "'\(digest)' is not a SHA-256 digest (hex, or base64)")
            }
            var android = AppSettings.AndroidAttestation(policy: policy)
            if (decryptionKey == nil) != (verificationKey == nil) {
                problem("\(base).android.decryption_key", "classic requests need both decryption_key and verification_key from the Play Console")
            } else if let decryptionKey, let verificationKey {
                do {
                    _ = try PlayIntegrityLocalDecoder(decryptionKey: decryptionKey, verificationKey: verificationKey)
                    android.decryptionKey = decryptionKey
                    android.verificationKey = verificationKey
                } catch {
                    problem("\(base).android.decryption_key", error.reason)
                }
            }
            if let serviceAccount {
                let json = JSONValue.object(from: Array(serviceAccount.utf8))
                if json?["client_email"]?.stringValue == nil || json?["private_key"]?.stringValue == nil || json?["token_uri"]?.stringValue == nil {
                    problem("\(base).android.service_account", "not a Google service account key (client_email, private_key, token_uri)")
                } else {
                    android.serviceAccount = Array(serviceAccount.utf8)
                }
            }
            if let decodeURL {
                if decodeURL.hasPrefix("https://") || ["127.0.0.1", "[::1]"].contains(RedirectURIRules.loopbackHost(decodeURL)) {
                    android.decodeServiceURL = decodeURL
                } else {
                    problem("\(base).android.decode_service_url", "must be https (or a loopback stand-in)")
                }
            }
            if android.decryptionKey == nil && android.serviceAccount == nil {
                problem("\(base).android", "set decryption_key and verification_key (classic requests) or service_account (standard requests)")
            }
            app.android = android
        } else if !digests.isEmpty || decryptionKey != nil || verificationKey != nil || serviceAccount != nil {
            problem("\(base).android.package_name", "the Android settings need the package name")
        }

        let attesterIssuer = text("\(base).attester.issuer")
        let attesterKeys = text("\(base).attester.keys_file")
        if let attesterIssuer, let attesterKeys {
            switch ConfigurationLoader.readFile(attesterKeys) {
            case .success(let contents):
                if let keys = try? JWKSet(json: Array(contents.utf8)), !keys.keys.isEmpty, keys.keys.allSatisfy({ !$0.isPrivate }) {
                    app.attester = AppSettings.ExternalAttester(issuer: attesterIssuer, keys: keys)
                } else {
                    problem("\(base).attester.keys_file", "\(attesterKeys) is not a JWKS of public keys")
                }
            case .failure(let failure):
                problem("\(base).attester.keys_file", failure.message)
            }
        } else if (attesterIssuer == nil) != (attesterKeys == nil) {
            problem("\(base).attester", "set both issuer and keys_file")
        }

        if app.attestation != .off && app.apple == nil && app.android == nil && app.attester == nil && !devAttester {
            problem("\(base).attestation", "'\(app.attestation.rawValue)' needs a way to attest: apple, android or attester")
        }
    }

    private mutating func readKeys(signingIDs: [String], sessionIDs: [String], required: Bool) -> RelayKeySettings {
        var keys = RelayKeySettings()
        for kid in signingIDs {
            guard let path = text("signing.keys.\(kid).file") else {
                problem("signing.keys.\(kid).file", "set the private key file (PEM or JWK, EC P-256 or RSA)")
                continue
            }
            if let key = privateKey(path, key: "signing.keys.\(kid).file", signing: true, keyID: kid) { keys.signingKeys.append(key) }
        }
        keys.activeSigningKey = activeKey(
            "signing", among: signingIDs, role: "signs", required: required,
            missing: "production needs Relais' own signing keys (development generates one and keeps it in the store)"
        )
        keys.activeRSAKey = activeRSAKey(keys, configured: !signingIDs.isEmpty, required: required)

        for id in sessionIDs {
            let key = "sessions.keys.\(id).secret"
            guard let text = secret(key) else {
                problem(key, "set a 32-byte key, base64url-encoded (secret or secret_file): openssl rand 32 | basenc --base64url")
                continue
            }
            guard let bytes = Base64.decode(text), bytes.count == 32 else {
                problem(key, "must be 32 bytes, base64url-encoded (openssl rand 32 | basenc --base64url)")
                continue
            }
            keys.sessionKeys.append((id, bytes))
        }
        keys.activeSessionKey = activeKey(
            "sessions", among: sessionIDs, role: "encrypts", required: required,
            missing: "production needs a session encryption key (development generates one and keeps it in the store)"
        )
        return keys
    }

    /// `signing.active_rsa_key`: the RSA key of `signing.keys` that signs RS256 id_tokens; implied
    /// when the active key is RSA or when there is one RSA key. Production needs one once it has
    /// keys (development generates one when none is configured).
    private mutating func activeRSAKey(_ keys: RelayKeySettings, configured: Bool, required: Bool) -> String? {
        let rsa = keys.signingKeys.filter { $0.keyType == .rsa }.compactMap(\.keyID)
        let implied = keys.activeSigningKey.flatMap { rsa.contains($0) ? $0 : nil } ?? (rsa.count == 1 ? rsa[0] : nil)
        let chosen = text("signing.active_rsa_key") ?? implied
        if let chosen, !rsa.contains(chosen) {
            problem("signing.active_rsa_key", "'\(chosen)' is not an RSA key of signing.keys (\(rsa.isEmpty ? "there is none" : rsa.joined(separator: ", ")))")
        } else if chosen == nil && rsa.count > 1 {
            problem("signing.active_rsa_key", "name the RSA key that signs id_tokens among signing.keys (\(rsa.joined(separator: ", ")))")
        } else if chosen == nil && configured && required {
            problem(
                "signing.active_rsa_key",
                "id_tokens are signed with RS256 (OpenID Connect Discovery 1.0 §3): add an RSA key to signing.keys (openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048)"
            )
        }
        return chosen
    }

    /// `<section>.active_key`: one of `<section>.keys`, implied when there is only one.
    private mutating func activeKey(_ section: String, among ids: [String], role: String, required: Bool, missing: String) -> String? {
        let active = text("\(section).active_key") ?? (ids.count == 1 ? ids[0] : nil)
        if let active, !ids.contains(active) {
            problem("\(section).active_key", "'\(active)' is not one of \(section).keys (\(ids.joined(separator: ", ")))")
        } else if active == nil && ids.count > 1 {
            problem("\(section).active_key", "name the key that \(role) among \(section).keys")
        }
        if ids.isEmpty && required { problem("\(section).keys", missing) }
        return active
    }

    mutating func checkURL(_ key: String, _ url: String, environment: RelaisConfiguration.Environment) {
        let lowered = url.lowercased()
        guard lowered.hasPrefix("https://") || lowered.hasPrefix("http://"), !url.contains("#") else {
            problem(key, "expected an absolute http(s) URL, got '\(url)'")
            return
        }
        if lowered.hasPrefix("http://") && environment == .production && !RedirectURIRules.isLoopback(url) {
            problem(key, "must use https in production (plain http is allowed for loopback hosts)")
        }
    }

    /// A private EC P-256 or RSA key from a PEM or JWK file; `signing` pins it to ES256/RS256.
    mutating func privateKey(_ path: String, key: String, signing: Bool, keyID: String? = nil) -> JWK? {
        let contents: String
        switch ConfigurationLoader.readFile(path) {
        case .success(let text): contents = text
        case .failure(let failure):
            problem(key, failure.message)
            return nil
        }
        do {
            let parsed = contents.contains("-----BEGIN") ? try JWK(pem: contents) : try JWK(json: Array(contents.utf8))
            guard parsed.isPrivate, let pem = parsed.privateKeyPEM(), parsed.keyType == .rsa || (parsed.keyType == .ec && parsed.curve == .p256) else {
                problem(key, "\(path) must hold a private EC P-256 or RSA key")
                return nil
            }
            let algorithm = signing ? (parsed.keyType == .ec ? "ES256" : "RS256") : nil
            return try JWK(pem: pem, keyID: keyID ?? parsed.keyID ?? parsed.thumbprint(), use: signing ? "sig" : "enc", algorithm: algorithm)
        } catch {
            problem(key, "\(path) holds no usable key (\(error.code))")
            return nil
        }
    }
}
