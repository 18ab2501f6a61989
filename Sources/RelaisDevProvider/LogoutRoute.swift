import Hummingbird
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore

/// `GET /session/end` (v1: `/logout`): a browser redirect with `id_token_hint`, and optionally
/// `state` and a registered `post_logout_redirect_uri` (FranceConnect's `LogoutParamsDto`,
/// `back/libs/oidc-provider/src/dto/logout-params.dto.ts`, marks both optional). Ends the provider
/// session, then 303 back (with `state` when given), or a page saying so without a URI.
struct LogoutRoute {
    let provider: DevProvider

    func register(on router: Router<RelaisRequestContext>) {
        let path = provider.configuration.provider.mode == .v1 ? "\(provider.prefix)/logout" : "\(provider.prefix)/session/end"
        router.get(RouterPath(path)) { request, _ in try await logout(request) }
    }

    private func logout(_ request: Request) async throws -> Response {
        guard let parameters = FormParameters.query(of: request), parameters.firstRepeatedName == nil else {
            return DevProvider.html(.badRequest, Pages.error(code: "Y030007", message: "The logout parameters cannot be read."))
        }
        guard let hint = parameters["id_token_hint"], !hint.isEmpty else {
            return DevProvider.html(.badRequest, Pages.error(code: "Y030007", message: "The id_token_hint parameter is missing."))
        }
        guard let issued = try await recognise(hint) else {
            return DevProvider.html(.badRequest, Pages.error(code: "DP_ID_TOKEN_HINT", message: "The id_token_hint was not issued by this provider."))
        }
        let faults = try await provider.faults.take([.logout], clientID: issued.clientID)
        if let failure = await DevProvider.preempt(faults, on: .logout) {
            return DevProvider.html(failure.status, Pages.error(code: "DP_INJECTED_FAILURE", message: "Injected failure: HTTP \(failure.status.code)."))
        }
        var target: String?
        if let requested = parameters["post_logout_redirect_uri"] {
            guard let client = provider.clients[issued.clientID], client.postLogoutRedirectURIs.contains(requested) else {
                return DevProvider.html(.badRequest, Pages.error(code: "DP_POST_LOGOUT_URI", message: "This post_logout_redirect_uri is not registered for the service provider."))
            }
            target = requested
        }
        if let sessionID = issued.sessionID { _ = try await provider.store.delete(StoreKeys.session(sessionID)) }
        if let cookieSession = provider.cookieSessionID(request) { _ = try await provider.store.delete(StoreKeys.session(cookieSession)) }
        var headers = HTTPFields()
        headers[.setCookie] = "\(DevProvider.sessionCookie)=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
        guard let target else { return DevProvider.html(.ok, Pages.signedOut(), headers: headers) }
        guard let state = parameters["state"] else { return DevProvider.redirect(to: target, headers: headers) }
        return DevProvider.redirect(to: FormParameters.url(target, adding: [("state", state)]), headers: headers)
    }

    /// The hint names a token this provider issued: looked up by hash (any form, even after its
    /// 60 s lifetime), or, for a signed token from an earlier run, by its signature.
    private func recognise(_ hint: String) async throws -> (clientID: String, sessionID: String?)? {
        if let issued = StoredJSON.decode(IssuedIDToken.self, try await provider.store.get(StoreKeys.issuedIDToken(hint))) {
            return (issued.clientID, issued.sessionID)
        }
        guard provider.configuration.provider.mode != .v1, let jws = try? JWS.parse(hint), (try? jws.verify(with: provider.keys.publicSet)) != nil,
            let claims = JSONValue.object(from: jws.payload), claims["iss"]?.stringValue == provider.issuer,
            let clientID = claims["aud"]?.stringValue
        else { return nil }
        return (clientID, nil)  // the session it belonged to is unknown: only the browser's cookie session ends
    }
}
