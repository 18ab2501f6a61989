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

    /// The redirect to the provider; a refusal the caller renders on its own surface.
    func start(_ app: AppRequest, deviceSID: String? = nil, logger: Logger) async throws(RelayError) -> Response {
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
        do {
            let transaction = LoginTransaction(app: app, providerNonce: nonce, providerCodeVerifier: verifier, deviceSID: deviceSID)
            try await sessions.saveTransaction(transaction, state: state)
        } catch {
            logger.error("store unavailable at authorize", metadata: ["error": "\(error)"])
            throw RelayError(.temporarilyUnavailable, "Relais cannot store the sign-in right now; try again shortly")
        }
        return RelayResponse.redirect(location)
    }
}
