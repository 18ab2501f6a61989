import FoundationEssentials
import Hummingbird
import RelaisConfig
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
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer "),
            case let token = String(authorization.dropFirst("bearer ".count).filter { $0 != " " }), !token.isEmpty
        else {
            return Self.invalidToken("access token missing", challenge: #"Bearer realm="userinfo""#)
        }
        guard let grant = StoredJSON.decode(AccessGrant.self, try await provider.store.get(StoreKeys.accessToken(token))),
            let client = provider.clients[grant.clientID], let identity = provider.identities[grant.identityID]
        else {
            return Self.invalidToken("invalid token provided", challenge: #"Bearer realm="userinfo", error="invalid_token", error_description="invalid token provided""#)
        }
        let faults = try await provider.faults.take([.userinfo], clientID: client.id)
        if let failure = await DevProvider.preempt(faults, on: .userinfo) { return failure }
        let claims = provider.tokens.userinfoClaims(grant: grant, identity: identity, now: provider.now(), faults: faults)
        let body: [UInt8]
        let contentType: String
        switch provider.configuration.provider.mode {
        case .v1:
            body = JSONValue.object(claims).serialized()
            contentType = "application/json"
        case .v2, .fcplus:
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
