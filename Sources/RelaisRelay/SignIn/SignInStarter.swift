import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisOIDC

/// Sends the browser to the provider for a sign-in: state, nonce and PKCE verifier made, the
/// transaction stored for /callback. The app's `/authorize` and the device page's sign-in share it.
struct SignInStarter: Sendable {
    let providers: [String: UpstreamProvider]
    let sessions: RelayStore
    let issuer: String

    /// Binds a device sign-in to the browser that starts it. Its result goes to the device, not
    /// back to this browser, so a provider link taken from `/device/sign-in` and sent to someone
    /// else would otherwise approve the sender's device with that person's sign-in, without their
    /// ever seeing the confirmation page. An app's sign-in needs none: its code goes back to the
    /// app's own redirect URI, where the app's state and PKCE verifier bind it. The cookie is
    /// ``BrowserCookies/signIn``.
    let cookies: BrowserCookies

    /// The redirect to the provider; a refusal the caller renders on its own surface. A device
    /// sign-in (`deviceSID`) reuses the browser's binding cookie when it has one (several device
    /// pages open at once in one browser), or sets a new one.
    func start(_ app: AppRequest, deviceSID: String? = nil, browser request: Request? = nil, logger: Logger) async throws(RelayError) -> Response {
        guard let provider = providers[app.upstream.providerID] else { throw RelayError(.serverError, "the provider is not configured") }
        let state = SecureRandom.token(bits: 256)
        let nonce = SecureRandom.token(bits: 256)
        let verifier = provider.settings.pkce ? PKCE.makeVerifier() : nil
        let location: String
        do {
            location = try await provider.authorizationURL(
                redirectURI: issuer + "/callback", state: state, nonce: nonce, acr: app.upstream.acr, prompt: app.upstream.forceLogin ? "login" : nil,
                codeChallenge: verifier.map(PKCE.challenge(for:)), idpHint: app.upstream.idpHint
            )
        } catch {
            logger.warning("provider unavailable at authorize", metadata: ["provider": "\(app.upstream.providerID)", "error": "\(error.code)"])
            throw RelayError(upstream: error)
        }
        let binding = deviceSID == nil ? nil : (request.flatMap(cookies.browserBinding(of:)) ?? SecureRandom.token(bits: 256))
        do {
            let transaction = LoginTransaction(
                app: app, providerNonce: nonce, providerCodeVerifier: verifier, deviceSID: deviceSID, browserHash: binding.map(SHA256.hexHash)
            )
            try await sessions.saveTransaction(transaction, state: state)
        } catch {
            logger.error("store unavailable at authorize", metadata: ["error": "\(error)"])
            throw RelayError(.temporarilyUnavailable, "Relais cannot store the sign-in right now; try again shortly")
        }
        var response = RelayResponse.redirect(location)
        if let binding {
            // Lax: the provider's redirect back to /callback is a top-level GET, which carries it.
            let lifetime = Int(sessions.settings.transactionLifetime.components.seconds)
            response.setCookie(cookies.cookie(cookies.signIn, value: binding, maxAge: lifetime))
        }
        return response
    }
}
