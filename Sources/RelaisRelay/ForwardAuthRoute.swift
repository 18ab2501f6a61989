import Hummingbird
import HTTPTypes
import RelaisConfig
import RelaisServer

/// `GET /auth`: forward-auth for gateways (nginx `auth_request`, Traefik ForwardAuth, Envoy
/// ext_authz). A valid Bearer gives 200 and the identity in headers; anything else 401 (or 403
/// for a missing scope or a too-low acr) with `WWW-Authenticate`. Query options:
/// `?scope=a+b` (required scopes), `?acr=eidas2` (minimum level), `?session=0|1` (override
/// `forward_auth.check_session`).
struct ForwardAuthRoute {
    let relay: Relay

    func register(on router: Router<RelaisRequestContext>) {
        let settings = relay.configuration.forwardAuth
        let names = [settings.subjectHeader, settings.clientHeader, settings.acrHeader, settings.scopeHeader, settings.sessionHeader].map { HTTPField.Name($0)! }
        router.get("/auth") { request, context in
            let options = FormParameters.query(of: request)
            let checkSession = options?["session"].map { $0 != "0" } ?? settings.checkSession
            let access: AccessTokenCheck.Verified
            switch await AccessTokenCheck(relay: relay).verify(request, session: checkSession ? .alive : .none) {
            case .success(let verified): access = verified
            case .failure(let failure): return failure.response(requestID: context.requestID)
            }
            if let required = options?["scope"]?.split(separator: " ").map(String.init), let missing = required.first(where: { !access.scopes.contains($0) }) {
                return BearerFailure.insufficientScope("the token lacks the scope '\(missing)'").response(requestID: context.requestID)
            }
            if let minimum = options?["acr"] {
                let order = ["eidas1", "eidas2", "eidas3"]
                guard let need = order.firstIndex(of: minimum), let have = access.acr.flatMap(order.firstIndex(of:)), have >= need else {
                    return BearerFailure.insufficientScope("the sign-in level is below \(minimum)").response(requestID: context.requestID)
                }
            }
            var headers = HTTPFields()
            headers[names[0]] = access.subject
            headers[names[1]] = access.clientID
            if let acr = access.acr { headers[names[2]] = acr }
            headers[names[3]] = access.scopes.joined(separator: " ")
            headers[names[4]] = access.sid
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers)
        }
    }
}
