import Hummingbird
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore

/// `POST /token`: the authorization code grant only (no refresh tokens, like FranceConnect), with
/// `client_secret_post` or `private_key_jwt`.
struct TokenRoute {
    let provider: DevProvider

    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    func register(on router: Router<RelaisRequestContext>) {
        router.post("\(provider.prefix)/token") { request, _ in
            try await token(request)
        }
    }

    private func token(_ request: Request) async throws -> Response {
        guard let form = try await FormParameters.body(of: request, limit: 64 * 1024) else {
            return DevProvider.oauthError(.badRequest, "invalid_request", "the body must be application/x-www-form-urlencoded")
        }
        if let repeated = form.firstRepeatedName {
            return DevProvider.oauthError(.badRequest, "invalid_request", "the parameter '\(repeated)' is given more than once")
        }
        let client: DevProviderConfiguration.Client
        switch await authenticate(form, request: request) {
        case .success(let authenticated): client = authenticated
        case .failure(let failure): return DevProvider.oauthError(.unauthorized, "invalid_client", failure.description)
        }
        let faults = try await provider.faults.take([.token, .idToken], clientID: client.id)
        if let failure = await DevProvider.preempt(faults, on: .token) { return failure }

        guard let grantType = form["grant_type"] else {
            return DevProvider.oauthError(.badRequest, "invalid_request", "missing required parameter 'grant_type'")
        }
        guard grantType == "authorization_code" else {
            return DevProvider.oauthError(.badRequest, "unsupported_grant_type", "unsupported grant_type '\(grantType)'")
        }
        guard let code = form["code"], !code.isEmpty else {
            return DevProvider.oauthError(.badRequest, "invalid_request", "missing required parameter 'code'")
        }
        // Before the code is consumed: a provider that cannot answer must not burn the code.
        let recipient: JWK?
        do {
            recipient = try await provider.encryptionKey(for: client)
        } catch {
            return error.response
        }
        // Single use: the first exchange deletes the code, a replay finds nothing.
        guard let grant = StoredJSON.decode(CodeGrant.self, try await provider.store.getAndDelete(StoreKeys.code(code))) else {
            return DevProvider.oauthError(.badRequest, "invalid_grant", "grant request is invalid (authorization code not found)")
        }
        guard grant.request.clientID == client.id else {
            return DevProvider.oauthError(.badRequest, "invalid_grant", "grant request is invalid (code was issued to another client)")
        }
        guard form["redirect_uri"] == grant.request.redirectURI else {
            return DevProvider.oauthError(.badRequest, "invalid_grant", "grant request is invalid (redirect_uri mismatch)")
        }

        let subject = provider.subject(identityID: grant.identityID, client: client)
        let accessToken = SecureRandom.token(bits: 256)
        let lifetime = provider.configuration.provider.accessTokenLifetime
        let access = AccessGrant(clientID: client.id, identityID: grant.identityID, scopes: grant.request.scopes, subject: subject, sessionID: grant.sessionID)
        try await provider.store.set(StoreKeys.accessToken(accessToken), StoredJSON.encode(access), ttl: lifetime)

        let claims = try provider.tokens.idTokenClaims(
            grant: grant, subject: subject, accessToken: accessToken, client: client, now: provider.now(), faults: faults,
            includeSessionID: client.idTokenSessionID)
        let idToken = try provider.tokens.seal(claims, for: client, target: .idToken, faults: faults, encryptTo: recipient)
        try await provider.store.set(
            StoreKeys.issuedIDToken(idToken), StoredJSON.encode(IssuedIDToken(clientID: client.id, sessionID: grant.sessionID)),
            ttl: provider.configuration.provider.sessionLifetime
        )
        let body: JSONValue = .object([
            "access_token": .string(accessToken),
            "token_type": .string("Bearer"),
            "expires_in": .number(Double(lifetime.components.seconds)),
            "id_token": .string(idToken),
            "scope": .string(grant.request.scopes.joined(separator: " ")),
        ])
        return DevProvider.answer(body.serialized(), contentType: "application/json", faults, on: .token)
    }

    struct AuthenticationFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Authenticates the client the way it is registered; any mismatch is `invalid_client`.
    private func authenticate(_ form: FormParameters, request: Request) async -> Result<DevProviderConfiguration.Client, AuthenticationFailure> {
        if request.headers[.authorization]?.lowercased().hasPrefix("basic ") == true {
            return .failure(AuthenticationFailure("client authentication failed (client_secret_basic is not supported)"))
        }
        if let assertion = form["client_assertion"] {
            guard form["client_assertion_type"] == Self.assertionType else {
                return .failure(AuthenticationFailure("client authentication failed (client_assertion_type must be \(Self.assertionType))"))
            }
            return await authenticate(assertion: assertion, claimedClient: form["client_id"])
        }
        guard let clientID = form["client_id"], let client = provider.clients[clientID] else {
            return .failure(AuthenticationFailure("client authentication failed (unknown client)"))
        }
        guard client.authentication == .clientSecretPost else {
            return .failure(AuthenticationFailure("client authentication failed (this client authenticates with \(client.authentication.rawValue))"))
        }
        guard let presented = form["client_secret"], let secret = client.secret, ConstantTime.equals(presented, secret) else {
            return .failure(AuthenticationFailure("client authentication failed (invalid secret provided)"))
        }
        return .success(client)
    }

    /// RFC 7523 §3: `iss` = `sub` = the client, `aud` the token endpoint (or the issuer), unexpired,
    /// signed ES256 or RS256 with a registered key, and a `jti` never seen before.
    private func authenticate(assertion: String, claimedClient: String?) async -> Result<DevProviderConfiguration.Client, AuthenticationFailure> {
        do {
            let jws = try JWS.parse(assertion)
            guard jws.algorithm == .es256 || jws.algorithm == .rs256 else {
                return .failure(AuthenticationFailure("client authentication failed (assertions are signed ES256 or RS256)"))
            }
            guard let unverified = JSONValue.object(from: jws.payload), let clientID = unverified["iss"]?.stringValue,
                let client = provider.clients[clientID]
            else {
                return .failure(AuthenticationFailure("client authentication failed (unknown client)"))
            }
            if let claimedClient, claimedClient != clientID {
                return .failure(AuthenticationFailure("client authentication failed (client_id differs from the assertion's issuer)"))
            }
            guard client.authentication == .privateKeyJWT else {
                return .failure(AuthenticationFailure("client authentication failed (this client authenticates with \(client.authentication.rawValue))"))
            }
            try jws.verify(with: try await provider.clientKeys.verificationKey(client: clientID, algorithm: jws.algorithm, keyID: jws.keyID))
            var policy = ClaimsPolicy(issuer: clientID, now: { [clock = provider.clock] in clock.now })
            policy.leeway = .seconds(5)
            policy.requiredClaims = ["sub", "jti", "aud"]
            let claims = try policy.validate(jws)
            guard claims.subject == clientID else { return .failure(AuthenticationFailure("client authentication failed (sub must equal iss)")) }
            let audiences = claims.audience
            guard audiences.contains("\(provider.issuer)/token") || audiences.contains(provider.issuer) else {
                return .failure(AuthenticationFailure("client authentication failed (aud must be the token endpoint)"))
            }
            guard let exp = claims.expiration, exp - Double(provider.now()) <= 600 else {
                return .failure(AuthenticationFailure("client authentication failed (assertions may live at most 10 minutes)"))
            }
            let remaining = max(1, Int(exp) - provider.now() + 5)
            let first = try await provider.store.setIfAbsent(StoreKeys.assertion(client: clientID, jti: claims.string("jti") ?? ""), [1], ttl: .seconds(remaining))
            guard first else { return .failure(AuthenticationFailure("client authentication failed (assertion jti already used)")) }
            return .success(client)
        } catch let error as JOSEError {
            return .failure(AuthenticationFailure("client authentication failed (\(error.code))"))
        } catch {
            return .failure(AuthenticationFailure("client authentication failed (keys unavailable)"))
        }
    }
}
