import FoundationEssentials
public import RelaisClock
public import RelaisConfig
import RelaisCrypto
public import RelaisHTTPClient
public import RelaisJOSE

/// What Relais learned about the person from the provider: the verified id_token and userinfo.
public struct UpstreamIdentity: Sendable {
    public var subject: String
    /// The provider's id_token as received (kept for the logout `id_token_hint`).
    public var idToken: String
    public var acr: String?
    public var amr: [String]?
    public var authTime: Double?
    /// Identity claims (userinfo over id_token), limited to the claims Relais knows how to release.
    public var claims: [String: JSONValue]
    /// The provider's session id (`sid` in the id_token), when it sends one: back-channel logout
    /// tokens may name the session by it.
    public var sessionID: String?
}

/// A verified back-channel logout token: whose sessions end. At least one of the two is set.
public struct LogoutToken: Sendable, Equatable {
    public var subject: String?
    public var sessionID: String?
    /// Unique per token; the caller refuses a second use.
    public var tokenID: String
}

/// One configured provider, seen from Relais as a confidential OpenID Connect client: discovery,
/// the authorization redirect, the code exchange, id_token and userinfo verification.
public actor UpstreamProvider {
    public nonisolated let settings: ProviderSettings
    private let http: HTTPClient
    private let clock: any RelaisClock
    private var cachedMetadata: (value: ProviderMetadata, fetchedAt: ContinuousClock.Instant)?
    /// The discovery fetch under way, which every caller meanwhile waits for (one request, not one
    /// per concurrent sign-in).
    private var discovering: Task<Result<ProviderMetadata, UpstreamError>, Never>?
    /// The last discovery failure while no document was ever read: repeated for
    /// ``retryAfterFailedRefresh`` instead of a request per caller.
    private var failedDiscovery: (error: UpstreamError, at: ContinuousClock.Instant)?
    private var keys: JWKSCache?

    static let metadataMaxAge: Duration = .seconds(3600)
    /// After a refresh failed, the last good document serves this long before the next attempt:
    /// a provider whose discovery is down does not cost every sign-in a wait for its timeout.
    /// Without a document yet, callers meanwhile get the failure again at once.
    static let retryAfterFailedRefresh: Duration = .seconds(30)
    static let leeway: Duration = .seconds(30)

    public init(settings: ProviderSettings, http: HTTPClient, clock: any RelaisClock = SystemClock()) {
        self.settings = settings
        self.http = http
        self.clock = clock
    }

    // MARK: - Endpoints

    /// The provider's endpoints: discovered (cached an hour; the last good document is kept if a
    /// refresh fails, and tried again ``retryAfterFailedRefresh`` later) or configured.
    public func metadata() async throws(UpstreamError) -> ProviderMetadata {
        if let cachedMetadata, clock.instant - cachedMetadata.fetchedAt < Self.metadataMaxAge { return cachedMetadata.value }
        guard settings.discovery else {
            guard let configured = ProviderMetadata(settings: settings) else { throw .invalidResponse("no endpoints configured") }
            cachedMetadata = (configured, clock.instant)
            return configured
        }
        if discovering == nil, let failed = failedDiscovery, clock.instant - failed.at < Self.retryAfterFailedRefresh { throw failed.error }
        let fetch = discovering ?? Task { await self.discover() }
        discovering = fetch
        let result = await fetch.value
        if discovering == fetch { discovering = nil }
        switch result {
        case .success(let metadata):
            failedDiscovery = nil
            cachedMetadata = (metadata, clock.instant)
            return metadata
        case .failure(let error):
            guard let cached = cachedMetadata else {
                failedDiscovery = (error, clock.instant)
                throw error
            }
            if clock.instant - cached.fetchedAt >= Self.metadataMaxAge {
                cachedMetadata = (cached.value, clock.instant - Self.metadataMaxAge + Self.retryAfterFailedRefresh)
            }
            return cached.value
        }
    }

    /// Where to send the browser. Only parameters the provider knows are sent: FranceConnect refuses
    /// any other.
    public func authorizationURL(
        redirectURI: String, state: String, nonce: String, acr: String?, prompt: String?, codeChallenge: String?, idpHint: String? = nil
    ) async throws(UpstreamError) -> String {
        let metadata = try await metadata()
        var parameters = [
            ("response_type", "code"), ("client_id", settings.clientID), ("redirect_uri", redirectURI),
            ("scope", settings.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
        ]
        if let acr {
            switch settings.acrRequest {
            case .acrValues: parameters.append(("acr_values", acr))
            case .claims: parameters.append(("claims", Self.essentialACRClaims(acr, order: settings.acrOrder)))
            }
        }
        if let prompt { parameters.append(("prompt", prompt)) }
        if let idpHint, settings.forwardsIDPHint { parameters.append(("idp_hint", idpHint)) }
        if let codeChallenge {
            parameters.append(("code_challenge", codeChallenge))
            parameters.append(("code_challenge_method", "S256"))
        }
        return FormParameters.url(metadata.authorizationEndpoint, adding: parameters)
    }

    /// The provider's logout redirect, when it has one.
    public func endSessionURL(idTokenHint: String, state: String) async -> String? {
        guard let metadata = try? await metadata(), let endpoint = metadata.endSessionEndpoint else { return nil }
        var parameters = [("id_token_hint", idTokenHint), ("state", state)]
        if let target = settings.postLogoutRedirectURI { parameters.append(("post_logout_redirect_uri", target)) }
        return FormParameters.url(endpoint, adding: parameters)
    }

    // MARK: - Sign-in

    /// Exchanges the code, verifies the id_token, fetches and checks userinfo.
    public func signIn(code: String, redirectURI: String, nonce: String, requestedACR: String?, codeVerifier: String?) async throws(UpstreamError) -> UpstreamIdentity {
        let metadata = try await metadata()
        let tokens = try await exchange(code: code, redirectURI: redirectURI, codeVerifier: codeVerifier, metadata: metadata)
        guard let rawIDToken = tokens["id_token"]?.stringValue else { throw .invalidResponse("the token response has no id_token") }
        guard let accessToken = tokens["access_token"]?.stringValue else { throw .invalidResponse("the token response has no access_token") }

        let idToken = try await verifyIDToken(rawIDToken, nonce: nonce, requestedACR: requestedACR, accessToken: accessToken)
        guard let subject = idToken.subject else { throw .idTokenRejected(.claimRejected(check: .required, reason: "claim 'sub' is missing")) }
        var claims: [String: JSONValue] = [:]
        for name in ScopeCatalogue.identityClaims { if let value = idToken[name] { claims[name] = value } }
        if let endpoint = metadata.userinfoEndpoint {
            let userinfo = try await fetchUserinfo(endpoint: endpoint, accessToken: accessToken)
            guard userinfo["sub"]?.stringValue == subject else { throw .userinfoRejected("userinfo 'sub' differs from the id_token's") }
            for name in ScopeCatalogue.identityClaims { if let value = userinfo[name] { claims[name] = value } }
        }
        return UpstreamIdentity(
            subject: subject, idToken: rawIDToken, acr: idToken.acr, amr: idToken["amr"]?.arrayValue?.compactMap(\.stringValue),
            authTime: idToken["auth_time"]?.numberValue, claims: claims, sessionID: idToken["sid"]?.stringValue
        )
    }

    // MARK: - Probe

    /// RFC 9207: whether a callback without `iss` is refused. `auto` follows the discovery document
    /// (`authorization_response_iss_parameter_supported`); a provider whose metadata cannot be read
    /// now is treated as sending it (fail closed).
    public func requiresCallbackIssuer() async -> Bool {
        switch settings.requireCallbackIssuer {
        case .always: return true
        case .never: return false
        case .auto:
            guard settings.discovery else { return false }
            return (try? await metadata().sendsCallbackIssuer) ?? true
        }
    }

    /// What `relais check-config --probe` reports: the provider's metadata (discovery, or the
    /// configured endpoints) and its signing keys are reachable now. A short description, or the
    /// error that stops sign-ins.
    public func probe() async throws(UpstreamError) -> String {
        let metadata = try await metadata()
        var parts = [settings.discovery ? "discovery document read" : "endpoints configured (no discovery)"]
        if metadata.jwksURI == nil {
            parts.append("no jwks_uri (id_tokens are checked with the client secret)")
        } else {
            do throws(JOSEError) {
                guard let keys = try await keySet() else { throw .keySetUnavailable(reason: "no jwks_uri") }
                let count = try await keys.currentSet().keys.count
                parts.append("JWKS read (\(count) key\(count == 1 ? "" : "s"))")
            } catch {
                throw .unavailable("JWKS: \(error.description)")
            }
        }
        return parts.joined(separator: ", ")
    }

    // MARK: - Back-channel logout

    /// The event member a logout token must carry in `events`.
    static let logoutEvent = "http://schemas.openid.net/event/backchannel-logout"
    /// A logout token is acted on when fresh: an older one is more likely captured than delayed.
    static let logoutTokenMaxAge: Duration = .seconds(300)

    /// Checks a logout token as OpenID Connect Back-Channel Logout 1.0 §2.6 asks: signed by this
    /// provider (decrypted first when it encrypts), `typ` `logout+jwt` when present, `iss`, `aud`,
    /// a recent `iat`, `exp` when present, `jti`, the logout event, `sub` and/or `sid`, and no `nonce`.
    public func verifyLogoutToken(_ raw: String) async throws(UpstreamError) -> LogoutToken {
        let claims: VerifiedClaims
        do {
            let jws = try JWS.parse(try signedToken(raw))
            if let type = jws.header["typ"]?.stringValue?.lowercased(), type != "logout+jwt", type != "application/logout+jwt" {
                throw UpstreamError.logoutTokenRejected("typ is '\(type)', not logout+jwt")
            }
            try await verifySignature(jws, algorithms: settings.idTokenAlgorithms)
            var policy = ClaimsPolicy(issuer: settings.issuer, audience: settings.clientID, now: { [clock] in clock.now })
            policy.leeway = Self.leeway
            policy.requireIssuedAt = true
            policy.requireExpiration = false  // optional in logout tokens; checked when present
            policy.maxAge = Self.logoutTokenMaxAge
            policy.requiredClaims = ["jti", "events"]
            claims = try policy.validate(jws)
        } catch let error as UpstreamError {
            throw error
        } catch let error as JOSEError {
            // The provider's operator reads this: the failed check and why, never a token.
            throw .logoutTokenRejected(error.description)
        } catch {
            throw .logoutTokenRejected("unreadable")
        }
        guard case .object = claims["events"]?.objectValue?[Self.logoutEvent] ?? .null else {
            throw .logoutTokenRejected("events has no \(Self.logoutEvent) member")
        }
        guard claims["nonce"] == nil else { throw .logoutTokenRejected("a logout token must not carry a nonce") }
        guard let tokenID = claims.string("jti"), !tokenID.isEmpty else { throw .logoutTokenRejected("jti is not a string") }
        let subject = claims.subject
        let sessionID = claims.string("sid")
        guard subject != nil || sessionID != nil else { throw .logoutTokenRejected("neither sub nor sid names whom to log out") }
        return LogoutToken(subject: subject, sessionID: sessionID, tokenID: tokenID)
    }

    private func exchange(code: String, redirectURI: String, codeVerifier: String?, metadata: ProviderMetadata) async throws(UpstreamError) -> [String: JSONValue] {
        var fields = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI)]
        var headers: [(name: String, value: String)] = [(name: "Accept", value: "application/json")]
        switch settings.clientAuthentication {
        case .clientSecretPost:
            fields += [("client_id", settings.clientID), ("client_secret", settings.clientSecret ?? "")]
        case .clientSecretBasic:
            // RFC 6749 §2.3.1: both parts form-encoded before base64.
            let credentials = FormEncoding.escape(settings.clientID) + ":" + FormEncoding.escape(settings.clientSecret ?? "")
            headers.append((name: "Authorization", value: "Basic " + Base64.encode(Array(credentials.utf8))))
        case .privateKeyJWT:
            guard let key = settings.clientKey else { throw .invalidResponse("no client key configured") }
            do {
                let assertion = try ClientAssertion.make(clientID: settings.clientID, tokenEndpoint: metadata.tokenEndpoint, key: key, now: clock.now)
                fields += [("client_id", settings.clientID), ("client_assertion_type", ClientAssertion.type), ("client_assertion", assertion)]
            } catch {
                throw .invalidResponse("cannot sign the client assertion (\(error.code))")
            }
        }
        if let codeVerifier { fields.append(("code_verifier", codeVerifier)) }
        let response = try await send(.form(url: metadata.tokenEndpoint, fields: fields, headers: headers, operation: "provider token"))
        let body = JSONValue.object(from: response.body)
        switch response.status {
        case 200:
            guard let body else { throw .invalidResponse("the token response is not a JSON object") }
            // RFC 6749 §5.1: token_type is REQUIRED.
            guard let type = body["token_type"]?.stringValue else { throw .invalidResponse("the token response has no token_type") }
            guard type.lowercased() == "bearer" else { throw .invalidResponse("token_type '\(type)' is not Bearer") }
            return body
        case 429, 500...599:
            throw .unavailable("the token endpoint answered HTTP \(response.status)")
        default:
            if let error = body?["error"]?.stringValue {
                throw .rejected(error: error, description: body?["error_description"]?.stringValue ?? "")
            }
            throw .invalidResponse("the token endpoint answered HTTP \(response.status)")
        }
    }

    // MARK: - Verification

    /// Decrypts a FranceConnect+ JWE with our keys, then returns the signed token inside.
    private func signedToken(_ token: String) throws(JOSEError) -> String {
        guard CompactSerialization.dots(in: token) == 4 else { return token }
        let decrypted = try JWE.parse(token).decrypt(with: JWKSet(keys: settings.decryptionKeys))
        guard decrypted.isNestedJWT else { throw .malformedToken(reason: "the JWE does not hold a signed JWT (cty: JWT)") }
        return decrypted.plaintextString
    }

    private func verifySignature(_ jws: JWS, algorithms: [JWSAlgorithm]) async throws(JOSEError) {
        guard algorithms.contains(jws.algorithm) else { throw .unsupportedAlgorithm(jws.algorithm.rawValue) }
        if jws.algorithm.isSymmetric {
            try jws.verify(with: JWK(symmetric: Array((settings.clientSecret ?? "").utf8)))
            return
        }
        guard let keys = try await keySet() else { throw .keySetUnavailable(reason: "the provider publishes no jwks_uri") }
        try await keys.verify(jws)
    }

    private func keySet() async throws(JOSEError) -> JWKSCache? {
        if let keys { return keys }
        let metadata: ProviderMetadata
        do {
            metadata = try await self.metadata()
        } catch {
            throw .keySetUnavailable(reason: error.description)
        }
        guard let uri = metadata.jwksURI else { return nil }
        let cache = JWKSCache(
            url: uri, fetcher: HTTPKeySetFetcher(client: http, operation: "provider jwks", timeout: settings.timeout), maxAge: .seconds(3600),
            minimumRefetchInterval: settings.jwksRefetchInterval,
            clock: { [clock] in clock.instant })
        keys = cache
        return cache
    }

    /// `accessToken`: the one returned with the id_token, which its `at_hash` (when present) must match.
    func verifyIDToken(_ raw: String, nonce: String, requestedACR: String?, accessToken: String?) async throws(UpstreamError) -> VerifiedClaims {
        do throws(JOSEError) {
            if settings.requireEncryptedIDToken && CompactSerialization.dots(in: raw) != 4 {
                throw JOSEError.malformedToken(reason: "the id_token is expected encrypted (JWE): require_encrypted_id_token")
            }
            let jws = try JWS.parse(try signedToken(raw))
            try await verifySignature(jws, algorithms: settings.idTokenAlgorithms)
            var policy = ClaimsPolicy(issuer: settings.issuer, audience: settings.clientID, now: { [clock] in clock.now })
            policy.leeway = Self.leeway
            policy.nonce = nonce
            policy.accessToken = accessToken
            policy.requireIssuedAt = true
            policy.requiredClaims = ["sub"]
            if let requestedACR {
                if !settings.acrOrder.isEmpty {
                    policy.minimumACR = requestedACR
                    policy.acrOrder = settings.acrOrder
                } else {
                    // No scale to compare levels on: the id_token must name one of the levels asked
                    // for, exactly (fail closed: an acr asked for is never dropped for want of an order).
                    let asked = requestedACR.split(separator: " ").map(String.init)
                    policy.minimumACR = asked.first
                    policy.acrOrder = asked
                }
            }
            return try policy.validate(jws)
        } catch {
            throw .idTokenRejected(error)
        }
    }

    private func fetchUserinfo(endpoint: String, accessToken: String) async throws(UpstreamError) -> [String: JSONValue] {
        let accept = (name: "Accept", value: "application/jwt, application/json")
        var request: HTTPClientRequest =
            switch settings.userinfoTokenIn {
            case .header: HTTPClientRequest(url: endpoint, headers: [(name: "Authorization", value: "Bearer \(accessToken)"), accept])
            case .body: HTTPClientRequest.form(url: endpoint, fields: [("access_token", accessToken)], headers: [accept])
            }
        request.operation = "provider userinfo"
        let response = try await send(request)
        switch response.status {
        case 200: break
        case 429, 500...599: throw .unavailable("userinfo answered HTTP \(response.status)")
        default: throw .invalidResponse("userinfo answered HTTP \(response.status)")
        }
        let contentType = response.header("content-type")?.lowercased() ?? ""
        let isJWT: Bool
        switch settings.userinfoFormat {
        case .json: isJWT = false
        case .jws, .jwe: isJWT = true
        case .auto: isJWT = contentType.hasPrefix("application/jwt")
        }
        guard isJWT else {
            guard let object = JSONValue.object(from: response.body) else { throw .invalidResponse("userinfo is not a JSON object") }
            return object
        }
        do {
            // A compact JWT is ASCII: dropping ASCII whitespace (a trailing newline) byte by byte costs
            // nothing, where a Character filter broke the whole body into graphemes. Anything else
            // left in it fails the base64url parse below.
            let text = String(decoding: response.body.filter { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }, as: UTF8.self)
            if settings.userinfoFormat == .jwe && CompactSerialization.dots(in: text) != 4 {
                throw JOSEError.malformedToken(reason: "userinfo is expected encrypted (JWE)")
            }
            let jws = try JWS.parse(try signedToken(text))
            try await verifySignature(jws, algorithms: settings.userinfoAlgorithms ?? settings.idTokenAlgorithms)
            var policy = ClaimsPolicy(now: { [clock] in clock.now })
            policy.leeway = Self.leeway
            policy.requireExpiration = false
            let claims = try policy.validate(jws)
            // OIDC Core §5.3.2: a signed userinfo should carry iss and aud; when it does, they must be right.
            if claims["iss"] != nil && claims.issuer != settings.issuer { throw JOSEError.claimRejected(check: .issuer, reason: "userinfo iss is not the provider") }
            if claims["aud"] != nil && !claims.audience.contains(settings.clientID) {
                throw JOSEError.claimRejected(check: .audience, reason: "userinfo aud does not contain our client_id")
            }
            return claims.claims
        } catch let error as JOSEError {
            throw .userinfoRejected("userinfo JWT rejected (\(error.code))")
        } catch {
            throw .userinfoRejected("userinfo JWT rejected")
        }
    }

    func send(_ request: HTTPClientRequest) async throws(UpstreamError) -> HTTPClientResponse {
        var request = request
        request.timeout = settings.timeout
        do {
            return try await http.send(request)
        } catch let error as HTTPClientError {
            throw .unavailable(error.description)
        } catch {
            throw .unavailable("\(error)")
        }
    }
}
