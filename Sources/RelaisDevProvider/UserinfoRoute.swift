import FoundationEssentials
import Hummingbird
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore

/// `GET|POST /userinfo`: the claims of the granted scopes, as a signed JWT (v2), an encrypted one
/// (FranceConnect+) or JSON (v1).
struct UserinfoRoute {
    let provider: DevProvider

    func register(on router: Router<RelaisRequestContext>) {
        router.get("\(provider.prefix)/userinfo") { request, _ in try await userinfo(request) }
        router.post("\(provider.prefix)/userinfo") { request, _ in try await userinfo(request) }
    }

    private func userinfo(_ request: Request) async throws -> Response {
        // RFC 6750: in the Authorization header, or as `access_token` in a POSTed form (§2.2).
        let inHeader = request.headers[.authorization].flatMap { authorization -> String? in
            guard authorization.lowercased().hasPrefix("bearer ") else { return nil }
            return String(authorization.dropFirst("bearer ".count).filter { $0 != " " })
        }
        let inBody = request.method == .post ? try await FormParameters.body(of: request, limit: 8 * 1024)?["access_token"] : nil
        guard let token = inHeader ?? inBody, !token.isEmpty else {
            return Self.invalidToken("access token missing", challenge: #"Bearer realm="userinfo""#)
        }
        guard let grant = StoredJSON.decode(AccessGrant.self, try await provider.store.get(StoreKeys.accessToken(token))),
            let client = provider.clients[grant.clientID], let identity = provider.identities[grant.identityID]
        else {
            return Self.invalidToken("invalid token provided", challenge: #"Bearer realm="userinfo", error="invalid_token", error_description="invalid token provided""#)
        }
        let faults = try await provider.faults.take([.userinfo], clientID: client.id)
        if faults.has(.tokenInBodyOnly, on: .userinfo) && inHeader != nil {
            return Self.invalidToken("send the access token in the body (access_token)", challenge: #"Bearer realm="userinfo", error="invalid_request""#)
        }
        if let failure = await DevProvider.preempt(faults, on: .userinfo) { return failure }
        let claims = provider.tokens.userinfoClaims(grant: grant, identity: identity, now: provider.now(), faults: faults)
        let body: [UInt8]
        let contentType: String
        switch provider.configuration.provider.mode {
        case .v1:
            body = JSONValue.object(claims).serialized()
            contentType = "application/json"
        case .v2, .fcplus, .proconnect:
            let recipient: JWK?
            do {
                recipient = try await provider.encryptionKey(for: client)
            } catch {
                return error.response
            }
            body = Array(try provider.tokens.seal(claims, for: client, target: .userinfo, faults: faults, encryptTo: recipient).utf8)
            contentType = "application/jwt"
        }
        return DevProvider.answer(body, contentType: contentType, faults, on: .userinfo)
    }

    private static func invalidToken(_ description: String, challenge: String) -> Response {
        var headers = HTTPFields()
        headers[.wwwAuthenticate] = challenge
        return DevProvider.oauthError(.unauthorized, "invalid_token", description, headers: headers)
    }
}
