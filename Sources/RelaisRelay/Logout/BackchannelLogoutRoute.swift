import Hummingbird
import Logging
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisOIDC
import RelaisServer

/// `POST /backchannel-logout` (OpenID Connect Back-Channel Logout 1.0): a provider that ended a
/// person's session tells Relais server to server, and the Relais sessions opened from it end with
/// it (refresh tokens, access tokens through introspection and forward-auth, /userinfo). Only
/// providers with `backchannel_logout: true` are heard. 200 when done (also when no session was
/// left); 400 with an OAuth error body when the token fails a check; 503 when the store is down,
/// so the provider retries. Anyone can post here: a token is checked before anything changes, and
/// the provider's keys are fetched at most once per `jwks_refetch_interval` whatever is posted.
struct BackchannelLogoutRoute: RelayRoutes {
    let providers: [String: UpstreamProvider]
    let sessions: RelayStore
    let events: SecurityEventLog

    /// A used `jti` is remembered past the token's acceptable age, so a replay is always caught.
    static let replayWindow: Duration = .seconds(600)

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        // Not limited by address: a provider may send many tokens at once from one address, and
        // one it cannot deliver is a session left open. A forged token costs a signature check;
        // the key set it names is fetched at most once per jwks_refetch_interval (JWKSCache).
        router.surface(.json).post("/backchannel-logout") { request, context in try await logout(request, context: context) }
    }

    private func logout(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        func refuse(_ description: String, reason: String = RelayError.Code.invalidRequest.rawValue, provider: String? = nil) -> RelayError {
            context.logger.warning("back-channel logout refused", metadata: ["reason": "\(description)"])
            events.record(.backchannelLogoutRefused, reason: reason, provider: provider)
            return .invalidRequest(description)
        }
        guard let form = try await FormParameters.body(of: request, limit: 64 * 1024), form.firstRepeatedName == nil else {
            throw refuse("the body must be a form (application/x-www-form-urlencoded) without repeated parameters")
        }
        guard let raw = form["logout_token"], !raw.isEmpty else { throw refuse("logout_token is missing") }
        let candidates = candidates(for: raw)
        guard !candidates.isEmpty else { throw refuse("no provider with back-channel logout enabled issued this token") }
        var verified: (provider: UpstreamProvider, token: LogoutToken)?
        var firstFailure: UpstreamError?
        for provider in candidates {
            do throws(UpstreamError) {
                verified = (provider, try await provider.verifyLogoutToken(raw))
                break
            } catch {
                firstFailure = firstFailure ?? error
            }
        }
        guard let (provider, token) = verified else {
            throw refuse(firstFailure?.description ?? "the logout token was not accepted", reason: firstFailure?.code ?? "provider_logout_token_rejected")
        }
        let providerID = provider.settings.id
        // The jti is remembered only once its sessions have ended: if the store fails halfway, the
        // provider's retry of the same token must still be heard, not refused as a replay. Two
        // copies arriving together both end the same sessions, which is harmless.
        guard try await !sessions.logoutTokenSeen(provider: providerID, jti: token.tokenID) else {
            RelayMetrics.securityEvent(.logoutTokenReplay)
            throw refuse("provider_logout_token_rejected: this jti was already used (replay)", reason: "logout_token_replay", provider: providerID)
        }
        let ended = try await endSessions(of: token, providerID: providerID)
        try await sessions.rememberLogoutToken(provider: providerID, jti: token.tokenID, for: Self.replayWindow)
        context.logger.info("back-channel logout", metadata: ["provider": "\(providerID)", "sessions_ended": "\(ended)"])
        events.record(.backchannelLogout, provider: providerID, [("sessions", String(ended))])
        return RelayResponse.done()
    }

    /// Providers that may have issued the token: back-channel logout on, and the same issuer when
    /// the token is a readable JWS (an encrypted one is tried with each until one opens it).
    private func candidates(for raw: String) -> [UpstreamProvider] {
        let enabled = providers.values.filter { $0.settings.backchannelLogout }.sorted { $0.settings.id < $1.settings.id }
        guard let jws = try? JWS.parse(raw) else { return enabled }
        let issuer = JSONValue.object(from: jws.payload)?["iss"]?.stringValue
        return enabled.filter { $0.settings.issuer == issuer }
    }

    /// The sessions the token names: by the provider's `sid` when Relais indexed it (narrowed to
    /// `sub` when both are given), otherwise every session of `sub` at this provider.
    private func endSessions(of token: LogoutToken, providerID: String) async throws -> Int {
        var targets: Set<String> = []
        if let sessionID = token.sessionID { targets = try await sessions.sessions(ofProviderSession: sessionID, provider: providerID) }
        if let subject = token.subject {
            let ofSubject = try await sessions.sessions(ofSubject: subject, provider: providerID)
            targets = targets.isEmpty ? ofSubject : targets.intersection(ofSubject)
        }
        for sid in targets { try await sessions.revoke(sid, reason: .backchannelLogout) }
        return targets.count
    }
}
