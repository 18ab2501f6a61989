import Foundation

extension RelaisClient {
    /// Signs in through the browser: authorization code with PKCE (S256), `dpop_jkt` when DPoP is
    /// on, then `/token` with the DPoP proof and the client attestation.
    ///
    /// With a session held and `acr` given, this is a step-up (RFC 9470): the current id_token
    /// goes as `id_token_hint`, and a failure keeps the current session.
    /// - Parameters:
    ///   - acr: the level to ask for (`acr_values`), such as `eidas2`.
    ///   - provider: Relais' provider id, when the app may use several.
    ///   - maxAge: the maximum age of the sign-in, in seconds.
    @discardableResult
    public func signIn(acr: String? = nil, provider: String? = nil, maxAge: Int? = nil) async throws -> SessionSummary {
        try? await ensureLoaded()
        let held = record
        let endpoints = try await endpoints()
        let key = configuration.dpop ? try loadInstanceKey() : nil
        let session = try await platform.web.begin()
        let verifier = CompactJWT.random()
        let state = CompactJWT.random(bits: 128)
        let nonce = CompactJWT.random(bits: 128)
        var parameters = [
            ("response_type", "code"), ("client_id", configuration.clientID), ("redirect_uri", session.redirectURI),
            ("scope", configuration.scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", CompactJWT.sha256(verifier)), ("code_challenge_method", "S256"),
        ]
        if let key { parameters.append(("dpop_jkt", key.thumbprint)) }
        if let acr { parameters.append(("acr_values", acr)) }
        if let provider { parameters.append(("provider", provider)) }
        if let maxAge { parameters.append(("max_age", String(maxAge))) }
        if acr != nil, let hint = held?.idToken { parameters.append(("id_token_hint", hint)) }
        if let device = configuration.deviceName { parameters.append(("device_name", device)) }
        var components = URLComponents(url: endpoints.authorization, resolvingAgainstBaseURL: false)!
        components.percentEncodedQuery = FormEncoding.encode(parameters)
        apply(.signInStarted)
        do {
            let redirect = try await session.run(authorizationURL: components.url!)
            let code = try Self.code(from: redirect, state: state, issuer: configuration.issuer)
            apply(.callbackReceived)
            let answer = try await tokenRequest([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", session.redirectURI), ("client_id", configuration.clientID),
                ("code_verifier", verifier),
            ])
            // OpenID Connect Core §3.1.3.7: the id_token answers this sign-in (its nonce).
            if let idToken = answer.string("id_token"), CompactJWT.claims(idToken)?.string("nonce") != nonce {
                throw RelaisKitError(.invalidResponse, "the id_token does not carry this sign-in's nonce")
            }
            return try accept(answer, previous: nil)
        } catch {
            // Whatever failed (an app's own browser adapter, the key), the state says it: never left authorizing.
            let error = RelaisKitError(wrapping: error)
            if let held, record == held { apply(.signInAbandoned(held.summary)) } else { apply(.failed(error)) }
            throw error
        }
    }

    /// The tokens of a `/token` answer, stored before anything else happens.
    func accept(_ answer: [String: KitJSON], previous: TokenRecord?) throws -> SessionSummary {
        let next = try TokenRecord(answer: answer, previous: previous, now: now)
        if configuration.dpop, next.tokenType.caseInsensitiveCompare("DPoP") != .orderedSame {
            throw RelaisKitError(.invalidResponse, "Relais returned \(next.tokenType) tokens although a DPoP proof was sent")
        }
        record = next
        loaded = true
        do {
            try save(next)
            unsaved = false
        } catch {
            // Kept in memory: the session goes on, and the next call writes it (``ensureLoaded``).
            // Whatever stopped the write (a locked device, a full disk, another process of the app
            // writing at the same time), Relais has rotated the refresh token: dropping these
            // tokens would leave the stored, rotated-out one to be sent again, a reuse that ends
            // the session.
            unsaved = true
        }
        apply(.tokensReceived(next.summary))
        return next.summary
    }

    /// The code of the redirect; `access_denied` is ``RelaisKitErrorCode/cancelled``, another
    /// `error` is Relais' code; a foreign `state` or `iss` is ``RelaisKitErrorCode/invalidCallback``.
    static func code(from redirect: URL, state: String, issuer: String) throws -> String {
        let query = FormEncoding.decode(URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? "")
        guard query["state"] == state else { throw RelaisKitError(.invalidCallback, "the redirect does not carry this sign-in's state") }
        // RFC 9207 §2.4: Relais says it sends `iss` (its metadata), so a redirect without one is refused too.
        guard query["iss"] == issuer else { throw RelaisKitError(.invalidCallback, "the redirect does not name this issuer (RFC 9207)") }
        if let error = query["error"] {
            let description = query["error_description"] ?? ""
            if error == "access_denied" { throw RelaisKitError(.cancelled, description.isEmpty ? "the sign-in was cancelled" : description) }
            throw RelaisKitError(.relay(error), description)
        }
        guard let code = query["code"], !code.isEmpty else { throw RelaisKitError(.invalidCallback, "the redirect carries no code") }
        return code
    }

    /// Signs in on this device by the device authorization grant (RFC 8628): `show` gets the user
    /// code and the verification URI; the library polls `/token` at Relais' interval until another
    /// signed-in device approves, denies, or the code expires.
    @discardableResult
    public func signInWithDevice(show: @Sendable (DeviceCode) async -> Void) async throws -> SessionSummary {
        let endpoints = try await endpoints()
        guard let url = endpoints.deviceAuthorization else { throw RelaisKitError(.relay("unauthorized_client"), "Relais offers no device authorization grant") }
        var fields = [("client_id", configuration.clientID), ("scope", configuration.scopes.joined(separator: " "))]
        if let device = configuration.deviceName { fields.append(("device_name", device)) }
        let response = try await platform.transport.send(.form(url, fields))
        guard response.status == 200, let answer = JSONReading.object(response.body), let deviceCode = answer.string("device_code"),
            let userCode = answer.string("user_code"), let verification = answer.string("verification_uri")
        else {
            throw RelayFailure(response)?.kitError(status: response.status) ?? RelaisKitError(.invalidResponse, "/device_authorization answered \(response.status)")
        }
        let shown = DeviceCode(
            userCode: userCode, verificationURI: verification, verificationURIComplete: answer.string("verification_uri_complete"),
            expiresIn: answer.int("expires_in") ?? 600, interval: answer.int("interval") ?? 5
        )
        apply(.signInStarted)
        await show(shown)
        var interval = shown.interval
        while true {
            try await platform.wait(TimeInterval(interval))
            do {
                let tokens = try await tokenRequest([
                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode), ("client_id", configuration.clientID),
                ])
                apply(.callbackReceived)
                return try accept(tokens, previous: nil)
            } catch let error as RelaisKitError {
                switch error.code.rawValue {
                case "authorization_pending": continue
                case "slow_down": interval += 5
                case "access_denied":
                    apply(.failed(RelaisKitError(.cancelled, "the request was denied")))
                    throw RelaisKitError(.cancelled, "the request was denied")
                case "expired_token":
                    apply(.failed(RelaisKitError(.deviceCodeExpired, error.message)))
                    throw RelaisKitError(.deviceCodeExpired, error.message)
                default:
                    apply(.failed(error))
                    throw error
                }
            }
        }
    }
}
