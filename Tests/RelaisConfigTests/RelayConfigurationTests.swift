import Foundation
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisConfig

/// `providers`, `apps`, `resource_servers`, Relais' keys and lifetimes.
@Suite(.tags(.fast)) struct RelayConfigurationTests {
    private func file(_ contents: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("relais-relay-\(UUID().uuidString)")
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    private func load(_ yaml: String, development: Bool = true) async throws -> Result<RelaisConfiguration, ConfigurationError> {
        let path = try file(yaml)
        do {
            return .success(
                try await ConfigurationLoader.load(filePath: path, environment: development ? ["RELAIS_SERVER_ENVIRONMENT": "development"] : [:], generateKey: TestKeys.generator())
            )
        } catch {
            return .failure(error)
        }
    }

    private func problems(_ yaml: String, development: Bool = true) async throws -> [String] {
        switch try await load(yaml, development: development) {
        case .success: []
        case .failure(let error): error.problems.map(\.description)
        }
    }

    @Test func presetsFillInFranceConnectsRules() async throws {
        let configuration = try await load(
            """
            providers:
              fc:
                preset: franceconnect-v2
                issuer: https://oidc.franceconnect.gouv.fr/api/v2
                client_id: abc
                client_secret: a-secret
              plus:
                preset: franceconnect-plus
                issuer: https://auth.franceconnect.gouv.fr/api/v2
                client_id: def
                client_secret: another-secret
                decryption_key_files: [\(try file(try #require(try TestKeys.rsa().privateKeyPEM())))]
              google:
                issuer: https://accounts.google.com
                client_id: ghi
                client_secret: google-secret
                client_auth: client_secret_basic
            apps:
              app:
                redirect_uris: ["com.example.app:/cb", "http://127.0.0.1/cb", "https://app.example.fr/cb"]
            relay:
              refresh_grace: 10s
              code_format: stored
            sessions:
              idle_timeout: 7d
            """
        ).get()
        let fc = configuration.providers[0], plus = configuration.providers[1], google = configuration.providers[2]
        #expect(fc.discovery && !fc.pkce && fc.acrValues == "eidas1" && fc.userinfoFormat == .jws && fc.requireCallbackIssuer == .always)
        #expect(fc.idTokenAlgorithms == [.es256, .rs256])
        #expect(fc.postLogoutRedirectURI == "http://127.0.0.1:8080/logout/callback")
        #expect(plus.acrValues == "eidas2" && plus.userinfoFormat == .jwe && plus.decryptionKeys.count == 1 && plus.idTokenAlgorithms == [.es256])
        #expect(google.pkce && google.userinfoFormat == .auto && google.acrValues == nil && google.clientAuthentication == .clientSecretBasic)
        let app = try #require(configuration.apps.first)
        #expect(app.providers == ["fc", "plus", "google"] && app.scopes == ["openid", "profile", "email"])
        #expect(app.accessTokenLifetime == .seconds(300))
        #expect(configuration.relay.refreshGrace == .seconds(10) && configuration.relay.sessionIdleTimeout == .seconds(7 * 86400))
        #expect(configuration.relay.codeFormat == .stored && RelaySettings().codeFormat == .sealed)
    }

    /// A code format Relais does not know is refused, never taken for the default.
    @Test func anUnknownCodeFormatIsRefused() async throws {
        let found = try await problems("relay:\n  code_format: opaque\n")
        #expect(found.contains("relay.code_format: expected one of sealed, stored; got 'opaque'"), "\(found)")
    }

    @Test func theProConnectPresetFollowsProConnect() async throws {
        let result = try await load(
            "providers:\n  pc:\n    preset: proconnect\n    issuer: https://auth.agentconnect.gouv.fr/api/v2\n    client_id: abc\n    client_secret: a-secret-of-32-characters-at-least\n",
            development: false
        )
        guard case .success(let configuration) = result else {
            Issue.record("refused: \(result)")
            return
        }
        let pc = try #require(configuration.providers.first)
        #expect(pc.scopes == ["openid", "given_name", "usual_name", "email", "uid", "siret"])
        #expect(pc.acrRequest == .claims && pc.acrValues == nil && pc.forwardsIDPHint && pc.pkce && pc.discovery)
        #expect(pc.acrValuesSupported == ["eidas0", "eidas0-mfa", "eidas1", "eidas1-mfa", "eidas2", "eidas3"] && pc.acrValuesSupported == pc.acrOrder)
        #expect(pc.idTokenAlgorithms == [.es256, .rs256] && pc.userinfoFormat == .auto && pc.requireCallbackIssuer == .always)
        #expect(pc.clientAuthentication == .clientSecretPost && !pc.requireEncryptedIDToken)
        let overridden = try await load(
            "providers:\n  pc:\n    preset: proconnect\n    issuer: https://auth.agentconnect.gouv.fr/api/v2\n    client_id: abc\n    client_secret: s\n    acr_request: acr_values\n    forward_idp_hint: false\n    acr_order: [eidas1, eidas2]\n",
            development: false
        )
        guard case .success(let other) = overridden, let changed = other.providers.first else {
            Issue.record("refused: \(overridden)")
            return
        }
        #expect(changed.acrRequest == .acrValues && !changed.forwardsIDPHint && changed.acrValuesSupported == ["eidas1", "eidas2"])
        #expect(
            try await problems("providers:\n  pc:\n    preset: proconnect\n    issuer: https://x.fr\n    client_id: a\n    client_secret: b\n    acr_request: both\n").contains(
                "providers.pc.acr_request: expected one of acr_values, claims; got 'both'"))
    }

    @Test func theAdminTokenIsLongOrRefused() async throws {
        #expect(try await problems("admin:\n  token: short\n") == ["admin.token: use at least 32 random bytes: it can end anyone's sessions"])
        let path = try file("admin-token-0123456789-0123456789-abcdef\n")
        guard case .success(let configuration) = try await load("admin:\n  token_file: \(path)\n") else {
            Issue.record("refused")
            return
        }
        #expect(configuration.adminToken == "admin-token-0123456789-0123456789-abcdef")
        guard case .success(let off) = try await load("server:\n  port: 8080\n") else { return }
        #expect(off.adminToken == nil)
    }

    @Test func providerProblemsNameTheirKey() async throws {
        let found = try await problems(
            """
            providers:
              nothing:
                preset: franceconnect-v9
              legacy:
                preset: franceconnect-v1
                issuer: https://fcp.integ01.dev-franceconnect.fr
                client_id: abc
                client_secret: short
              plus:
                preset: franceconnect-plus
                issuer: ftp://example.fr
                client_id: abc
                client_auth: private_key_jwt
                scopes: [profile]
                id_token_algs: [ES256, XS999]
            """
        )
        #expect(found.contains("providers.nothing.preset: expected one of franceconnect-v2, franceconnect-plus, franceconnect-v1, proconnect, oidc; got 'franceconnect-v9'"))
        #expect(
            found.contains(
                "providers.nothing.issuer: set the provider's issuer (FranceConnect v2: https://oidc.franceconnect.gouv.fr/api/v2, ProConnect: https://auth.agentconnect.gouv.fr/api/v2)"
            ))
        #expect(found.contains("providers.nothing.client_id: set the client_id the provider registered for Relais"))
        #expect(found.contains("providers.legacy.client_secret: HS256 id_tokens are checked with the client secret: it needs at least 32 bytes"))
        #expect(found.contains("providers.legacy.authorization_endpoint: required when discovery is off"))
        #expect(found.contains("providers.legacy.token_endpoint: required when discovery is off"))
        #expect(found.contains("providers.plus.issuer: expected an absolute http(s) URL, got 'ftp://example.fr'"))
        #expect(found.contains("providers.plus.client_key_file: private_key_jwt needs a private key file (EC P-256 or RSA)"))
        #expect(found.contains("providers.plus.scopes: must include openid"))
        #expect(found.contains("providers.plus.id_token_algs: unknown algorithm 'XS999' (RS256, ES256, PS256, EdDSA, HS256, ...)"))
        // In development a FranceConnect+ provider without keys gets a generated one (next test).
        #expect(!found.contains { $0.hasPrefix("providers.plus.decryption_key_files") })
        let production = try await problems("providers:\n  fc:\n    issuer: http://idp.example.fr\n    client_id: a\n    client_secret: b\n", development: false)
        #expect(production == ["providers.fc.issuer: must use https in production (plain http is allowed for loopback hosts)"])
        let plus = "providers:\n  plus:\n    preset: franceconnect-plus\n    issuer: https://auth.franceconnect.gouv.fr/api/v2\n    client_id: a\n    client_secret: b\n"
        #expect(try await problems(plus, development: false) == ["providers.plus.decryption_key_files: userinfo_format jwe (FranceConnect+) needs Relais' private decryption keys"])
        let signedOnly = plus + "    userinfo_format: jws\n"
        #expect(try await problems(signedOnly, development: false) == ["providers.plus.decryption_key_files: require_encrypted_id_token needs Relais' private decryption keys"])
    }

    /// `make demo` runs a FranceConnect+ look-alike without a key file: development makes a key for
    /// the process and says so; it is Relais' published encryption key.
    @Test func developmentGeneratesAMissingDecryptionKeyAndSaysSo() async throws {
        let yaml = "providers:\n  plus:\n    preset: franceconnect-plus\n    issuer: http://127.0.0.1:8082/api/v2\n    client_id: a\n    client_secret: b\n"
        guard case .success(let configuration) = try await load(yaml, development: true) else {
            Issue.record("refused")
            return
        }
        let plus = try #require(configuration.providers.first)
        #expect(plus.decryptionKeys.count == 1 && plus.decryptionKeys[0].isPrivate)
        #expect(configuration.warnings.contains("providers.plus: no decryption_key_files, so a development key was generated; it changes at each start (production refuses this)"))
    }

    @Test func appRedirectURIsFollowRFC8252() async throws {
        let found = try await problems(
            """
            providers:
              fc:
                issuer: https://idp.example.fr
                client_id: a
                client_secret: b
            apps:
              app:
                redirect_uris: ["http://app.example.fr/cb", "http://localhost:8000/cb", "myapp:/cb", "https://app.example.fr/cb#frag", "com.example.app:/cb", "http://[::1]/cb"]
                providers: [fc, github]
                scopes: [profile]
              empty:
                redirect_uris: []
            """
        )
        #expect(found.contains("apps.app.redirect_uris: 'http://app.example.fr/cb': plain http is only for loopback redirects (http://127.0.0.1:{port}/...)"))
        #expect(found.contains("apps.app.redirect_uris: 'http://localhost:8000/cb': use 127.0.0.1 or [::1], not localhost (RFC 8252 §8.3)"))
        #expect(found.contains("apps.app.redirect_uris: 'myapp:/cb': a private-use scheme must be a reverse domain name such as com.example.app (RFC 8252 §7.1)"))
        #expect(found.contains("apps.app.redirect_uris: 'https://app.example.fr/cb#frag': must not contain a fragment"))
        #expect(found.contains("apps.app.providers: 'github' is not a configured provider (fc)"))
        #expect(found.contains("apps.app.scopes: must include openid"))
        #expect(found.contains("apps.empty.redirect_uris: list at least one redirect URI"))
        #expect(found.count == 7)
    }

    /// Loopback is the exact host (127.0.0.1, [::1], localhost) with an optional port, parsed
    /// from the authority: never a prefix of a longer host, never behind userinfo.
    @Test func loopbackIsAnExactHostNotAPrefix() async throws {
        let plainHTTP = "plain http is only for loopback redirects (http://127.0.0.1:{port}/...)"
        #expect(RedirectURIRules.problem("http://127.0.0.1.evil.example/cb") == plainHTTP)
        #expect(RedirectURIRules.problem("http://127.0.0.1:80@evil.example/cb") == plainHTTP)
        #expect(RedirectURIRules.problem("http://[::1].evil.example/cb") == plainHTTP)
        #expect(RedirectURIRules.problem("http://127.0.0.1:99999/cb") == plainHTTP)
        #expect(RedirectURIRules.problem("http://localhost.corp.example/cb") == plainHTTP)
        for fine in ["http://127.0.0.1/cb", "http://127.0.0.1:8080/cb", "http://[::1]:51000/cb?x=1", "http://127.0.0.1"] {
            #expect(RedirectURIRules.problem(fine) == nil, "\(fine)")
        }
        let found = try await problems(
            """
            providers:
              fc:
                issuer: http://localhost.corp.example
                client_id: a
                client_secret: b
              other:
                issuer: http://127.0.0.1:80@evil.example/api
                client_id: a
                client_secret: b
                token_endpoint: http://localhost:9000/token
            pages:
              support_url: http://127.0.0.1.evil.example/help
            """, development: false)
        #expect(found.contains("providers.fc.issuer: must use https in production (plain http is allowed for loopback hosts)"))
        #expect(found.contains("providers.other.issuer: must use https in production (plain http is allowed for loopback hosts)"))
        #expect(!found.contains { $0.hasPrefix("providers.other.token_endpoint") })
        #expect(found.contains("pages.support_url: expected an https or mailto: URL, got 'http://127.0.0.1.evil.example/help'"))
    }

    /// Bounds that keep protections working: a long refresh grace neutralises reuse detection, a
    /// JWKS refetched more than once a second hammers the provider on every unknown kid, and a
    /// rate-limit window the runtime counts in whole seconds is never truncated silently.
    @Test func durationsThatDefeatAProtectionAreRefused() async throws {
        let yaml = { (grace: String, refetch: String, window: String) in
            """
            providers:
              fc:
                issuer: https://idp.example.fr
                client_id: a
                client_secret: b
                jwks_refetch_interval: \(refetch)
            relay:
              refresh_grace: \(grace)
            rate_limit:
              window: \(window)
            """
        }
        #expect(
            try await problems(yaml("30d", "500ms", "1500ms")).sorted() == [
                "providers.fc.jwks_refetch_interval: expected a duration, at least 1s, got '500ms'",
                "rate_limit.window: expected a whole number of seconds, at least 1s, got '1500ms'",
                "relay.refresh_grace: expected a duration, at most 5m, got '30d'",
            ])
        let fine = try await load(yaml("5m", "1s", "90s")).get()
        #expect(fine.relay.refreshGrace == .seconds(300) && fine.rateLimit.window == .seconds(90))
        #expect(fine.providers.first?.jwksRefetchInterval == .seconds(1))
    }

    /// `server.trusted_proxies` is checked with the parser the runtime matches with: an
    /// IPv4-mapped IPv6 network is IPv4 to it (prefixes up to 32), so `::ffff:10.0.0.0/104` would
    /// load and then never match; it is refused.
    @Test func trustedProxiesLoadOnlyWhenTheRuntimeCanUseThem() async throws {
        let found = try await problems("server:\n  trusted_proxies: [\"::ffff:10.0.0.0/104\", \"::ffff:10.0.0.1\", 10.0.0.0/8, fd00::/8]\n")
        #expect(found == ["server.trusted_proxies: '::ffff:10.0.0.0/104' \(Self.notANetwork)"])
        let proxies = try await load("server:\n  trusted_proxies: [\"::ffff:10.0.0.1\", 10.0.0.0/8, fd00::/8]\n").get().server.trustedProxies
        #expect(proxies.map { IPNetwork($0) != nil } == [true, true, true])
    }

    static let notANetwork = "is not an IP address or CIDR network (10.0.0.0/8, ::1/128; an IPv4-mapped network is written as IPv4: 10.0.0.0/8)"

    /// The level sent when an app asks for none must be one the provider's acr_order (its own or
    /// its preset's) knows: otherwise every sign-in fails after the provider answered.
    @Test func defaultACRValuesMustBeInTheACROrder() async throws {
        let found = try await problems(
            """
            providers:
              fc:
                preset: franceconnect-v2
                issuer: https://oidc.franceconnect.gouv.fr/api/v2
                client_id: a
                client_secret: b
                acr_values: eidas4
              custom:
                issuer: https://idp.example.fr
                client_id: a
                client_secret: b
                acr_order: [low, high]
                acr_values: "low top"
              free:
                issuer: https://idp.example.fr
                client_id: a
                client_secret: b
                acr_values: anything
            """
        )
        let advice = "so no sign-in could reach it; name one of those levels, or add it to acr_order"
        #expect(
            found == [
                "providers.fc.acr_values: 'eidas4' is not a level of acr_order (eidas1, eidas2, eidas3), \(advice)",
                "providers.custom.acr_values: 'top' is not a level of acr_order (low, high), \(advice)",
            ])
    }

    @Test func keysAreReadAndChecked() async throws {
        let ec = try file(try #require(try JWK.generate(for: .es256).privateKeyPEM()))
        let rsa = try file(try #require(try TestKeys.rsa().privateKeyPEM()))
        let session = try file(Base64URL.encode(SecureRandom.bytes(32)) + "\n")
        let configuration = try await load(
            """
            signing:
              active_key: new
              keys:
                old: {file: \(rsa)}
                new: {file: \(ec)}
            sessions:
              keys:
                s1: {secret_file: \(session)}
            """,
            development: false
        ).get()
        #expect(configuration.keys.signingKeys.map(\.keyID) == ["old", "new"])
        #expect(configuration.keys.signingKeys.map(\.algorithm) == ["RS256", "ES256"])
        #expect(configuration.keys.activeSigningKey == "new")
        #expect(configuration.keys.activeSessionKey == "s1" && configuration.keys.sessionKeys[0].key.count == 32)

        let broken = try await problems(
            """
            signing:
              active_key: missing
              keys:
                bad: {file: \(try file("not a key"))}
                public: {file: \(try file(try #require(try JWK.generate(for: .es256).publicKeyPEM())))}
            sessions:
              keys:
                short: {secret: abc}
                a: {secret: \(Base64URL.encode(SecureRandom.bytes(32)))}
                b: {secret: \(Base64URL.encode(SecureRandom.bytes(32)))}
              idle_timeout: 100d
            resource_servers:
              api: {secret: tiny}
            """
        )
        #expect(found(broken, "signing.keys.bad.file: ", "holds no usable key (jose_invalid_key)"))
        #expect(found(broken, "signing.keys.public.file: ", "must hold a private EC P-256 or RSA key"))
        #expect(broken.contains("signing.active_key: 'missing' is not one of signing.keys (bad, public)"))
        #expect(broken.contains("sessions.keys.short.secret: must be 32 bytes, base64url-encoded (openssl rand 32 | basenc --base64url)"))
        #expect(broken.contains("sessions.active_key: name the key that encrypts among sessions.keys"))
        #expect(broken.contains("sessions.idle_timeout: is longer than sessions.lifetime, which bounds it"))
        #expect(broken.contains("resource_servers.api.secret: set a secret of at least 16 bytes (secret or secret_file)"))
    }

    @Test func gatewayLimitAndAppLinkSettingsAreChecked() async throws {
        let good = try await load(
            """
            server:
              trusted_proxies: [10.0.0.0/8, "::1"]
            rate_limit:
              per_ip: 30
              window: 10s
            forward_auth:
              check_session: false
              subject_header: X-User-Id
            """
        ).get()
        #expect(good.server.trustedProxies == ["10.0.0.0/8", "::1"])
        #expect(good.rateLimit.perIP == 30 && good.rateLimit.window == .seconds(10) && good.rateLimit.enabled)
        #expect(!good.forwardAuth.checkSession && good.forwardAuth.subjectHeader == "X-User-Id" && good.forwardAuth.clientHeader == "X-Relais-Client")
        let bad = try await problems(
            """
            server:
              trusted_proxies: [10.0.0.0/40, proxy.internal]
            rate_limit:
              per_ip: 0
            forward_auth:
              acr_header: "X Acr"
            well_known:
              assetlinks_file: \(try file("{not json"))
            """
        )
        #expect(
            bad.contains("server.trusted_proxies: '10.0.0.0/40' is not an IP address or CIDR network (10.0.0.0/8, ::1/128; an IPv4-mapped network is written as IPv4: 10.0.0.0/8)"))
        #expect(
            bad.contains(
                "server.trusted_proxies: 'proxy.internal' is not an IP address or CIDR network (10.0.0.0/8, ::1/128; an IPv4-mapped network is written as IPv4: 10.0.0.0/8)"))
        #expect(bad.contains("rate_limit.per_ip: must be between 1 and 1000000, got 0"))
        #expect(bad.contains("forward_auth.acr_header: 'X Acr' is not a valid header name (letters, digits and '-')"))
        #expect(bad.contains { $0.hasPrefix("well_known.assetlinks_file: ") && $0.hasSuffix("is not valid JSON") })
        #expect(!bad.contains { $0.hasPrefix("forward_auth: ") })
        for clash in ["scope_header: x-relais-sub", "session_header: cache-control"] {
            let clashing = try await problems("forward_auth:\n  \(clash)")
            #expect(
                clashing.contains(
                    "forward_auth: the identity headers (subject_header, client_header, acr_header, scope_header, session_header, attested_header) must be distinct, and none Cache-Control"
                ), "\(clash)")
        }
    }

    @Test func cacheBudgetsAreSizesWithBinaryUnits() async throws {
        let defaults = try await load("log: {level: info}").get().memory
        #expect(defaults == MemorySettings() && defaults.verifiedTokens == 6 << 20 && defaults.sessionLiveness == 2 << 20)
        let set = try await load(
            """
            memory:
              verified_tokens: 12MiB
              identities: 512 KiB
              userinfo_bodies: 0
              session_liveness: 1048576
            """
        ).get().memory
        #expect(set.verifiedTokens == 12 << 20 && set.identities == 512 << 10 && set.userinfoBodies == 0 && set.sessionLiveness == 1 << 20)
        let sizes: [(String, Int?)] = [
            ("1GiB", 1 << 30), ("7B", 7), ("0KiB", 0), ("-1MiB", nil), ("1.5MiB", nil), ("MiB", nil), ("8 mb", nil), ("99999999999999MiB", nil), ("+3", nil),
            ("999999999999GiB", nil), ("17179869184GiB", nil), ("8589934591GiB", 8_589_934_591 << 30),
        ]
        for (text, bytes) in sizes { #expect(ByteSizeText.parse(text) == bytes, "\(text)") }
        #expect(ByteSizeText.format(1 << 30) == "1GiB" && ByteSizeText.format(6 << 20) == "6MiB" && ByteSizeText.format(1536) == "1536B")
        let bad = try await problems("memory:\n  verified_tokens: 2GiB\n  identities: lots\n  userinfo_bodies: 999999999999GiB")
        #expect(bad.contains("memory.verified_tokens: expected a size of at most 1GiB (0, 512KiB, 8MiB, 1GiB or a number of bytes), got '2GiB'"))
        #expect(bad.contains("memory.identities: expected a size of at most 1GiB (0, 512KiB, 8MiB, 1GiB or a number of bytes), got 'lots'"))
        #expect(bad.contains("memory.userinfo_bodies: expected a size of at most 1GiB (0, 512KiB, 8MiB, 1GiB or a number of bytes), got '999999999999GiB'"))
    }

    private func found(_ problems: [String], _ prefix: String, _ suffix: String) -> Bool {
        problems.contains { $0.hasPrefix(prefix) && $0.hasSuffix(suffix) }
    }

    /// Device approval (finding 1): a DPoP-proved, recent approver by default; an approver that can
    /// never make a DPoP-bound token is a mistake reported at load.
    @Test func deviceApprovalSettingsAreReadAndChecked() async throws {
        let base = """
            providers:
              fc: {issuer: http://127.0.0.1:9/api/v2, client_id: a, client_secret: b}
            apps:
              phone: {redirect_uris: ["com.example.app:/cb"], dpop: DPOP}
              tv:
                name: Télévision du salon
                redirect_uris: ["http://127.0.0.1/cb"]
                device_grant: true
                device_approvers: [phone]
            """
        let defaults = try await load(base.replacingOccurrences(of: "DPOP", with: "allowed")).get()
        let tv = try #require(defaults.apps.first { $0.clientID == "tv" })
        #expect(tv.name == "Télévision du salon")
        #expect(tv.deviceGrant?.approverProof == .dpop && tv.deviceGrant?.approvalMaxAge == .seconds(900))
        let set = try await load(base.replacingOccurrences(of: "DPOP", with: "allowed") + "\n    device_approvers_proof: bearer\n    device_approval_max_age: 5m\n").get()
        let relaxed = try #require(set.apps.first { $0.clientID == "tv" }?.deviceGrant)
        #expect(relaxed.approverProof == .bearer && relaxed.approvalMaxAge == .seconds(300))
        #expect(
            try await problems(base.replacingOccurrences(of: "DPOP", with: "off")) == [
                "apps.tv.device_approvers: 'phone' has dpop: off, so it can never approve with a DPoP-bound token; allow DPoP there or set device_approvers_proof: bearer"
            ])
        #expect(try await problems(base.replacingOccurrences(of: "DPOP", with: "off") + "\n    device_approvers_proof: bearer\n").isEmpty)
        #expect(
            try await problems(base.replacingOccurrences(of: "DPOP", with: "allowed") + "\n    device_approvers_proof: maybe\n") == [
                "apps.tv.device_approvers_proof: expected one of dpop, bearer; got 'maybe'"
            ])
        let withoutGrant = "apps:\n  phone: {redirect_uris: [\"com.example.app:/cb\"], device_approval_max_age: 5m}\n"
        #expect(try await problems(withoutGrant).contains("apps.phone.device_approvers: set device_grant: true for the app first"))
    }

    /// Finding 6: in production, `/auth` without audiences would take any app's token.
    @Test func productionForwardAuthNeedsAudiences() async throws {
        let apps = """
            providers:
              fc: {issuer: https://idp.example.fr, client_id: a, client_secret: b}
            apps:
              phone: {redirect_uris: ["com.example.app:/cb"]}
            """
        let found = try await problems(apps, development: false)
        #expect(found.contains { $0.hasPrefix("forward_auth.audiences: is empty: /auth would accept any app's access token") }, "\(found)")
        let listed = try await problems(apps + "\nforward_auth: {audiences: [api.example.fr]}\n", development: false)
        #expect(!listed.contains { $0.hasPrefix("forward_auth.audiences") }, "\(listed)")
        // Development keeps the convenience.
        #expect(!(try await problems(apps)).contains { $0.hasPrefix("forward_auth.audiences") })
    }

    /// The same for `/introspect`: in production, a resource server lists the audiences it serves,
    /// or it would be told that any app's token, minted for any API, is active.
    @Test func productionResourceServersNeedAudiences() async throws {
        let server = """
            resource_servers:
              billing: {secret: billing-introspection-secret}
            """
        let found = try await problems(server, development: false)
        #expect(found.contains { $0.hasPrefix("resource_servers.billing.audiences: is empty: /introspect would answer active for any app's access token") }, "\(found)")
        let listed = try await problems(server.replacingOccurrences(of: "}", with: ", audiences: [billing-api]}"), development: false)
        #expect(!listed.contains { $0.hasPrefix("resource_servers.billing.audiences") }, "\(listed)")
        #expect(!(try await problems(server)).contains { $0.hasPrefix("resource_servers.billing.audiences") })
    }
}
