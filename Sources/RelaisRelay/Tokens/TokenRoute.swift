import Hummingbird
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// `POST /token` for public clients: the form is read and the app identified here; each grant
/// lives in its own type (`AuthorizationCodeGrant`, `RefreshGrant`).
struct TokenRoute: RelayRoutes {
    let apps: [String: AppSettings]
    let limiter: RateLimiter
    let authorizationCode: AuthorizationCodeGrant
    let refresh: RefreshGrant
    let device: DeviceCodeGrant
    let dpop: DPoPGuard
    let attestation: ClientAttestationGuard
    let issuer: String

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.post("/token") { request, context in
            try await limiter.guarding(.json, request, context) { try await token(request, context: context) }
        }
    }

    private func token(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        guard let form = try await FormParameters.body(of: request, limit: 64 * 1024) else {
            throw RelayError.invalidRequest("the body must be an application/x-www-form-urlencoded form of at most \(FormParameters.maxFields) fields")
        }
        if let repeated = form.firstRepeatedName { throw RelayError.invalidRequest("the parameter '\(repeated)' is given more than once") }
        guard let grantType = form["grant_type"] else { throw RelayError.invalidRequest("grant_type is missing") }
        let client = try PublicClient(request, form)
        let clientID = client.id
        guard let app = apps[clientID] else { throw client.unknown }
        if let limited = await limiter.check(clientID: clientID, logger: context.logger) { throw limited }
        guard grantType == "authorization_code" || grantType == "refresh_token" || grantType == DeviceCodeGrant.grantType else {
            throw RelayError(.unsupportedGrantType, "grant_type must be authorization_code, refresh_token or \(DeviceCodeGrant.grantType)")
        }
        let attested = try await attestation.check(request, app: app)
        let proof = try await dpop.tokenRequestProof(request, app: app, url: issuer + "/token")
        let response: JSONValue
        switch grantType {
        case "authorization_code": response = try await authorizationCode.redeem(form, app: app, proof: proof, attested: attested, logger: context.logger)
        case "refresh_token": response = try await refresh.rotate(form, app: app, proof: proof, attested: attested, logger: context.logger)
        default: response = try await device.poll(form, app: app, proof: proof, attested: attested, logger: context.logger)
        }
        var answer = RelayResponse.json(.ok, response)
        // RFC 9449 §8: the next nonce comes with every answer, so the app rarely has to retry.
        if app.dpopNonce, app.dpop != .off { answer.headers[DPoPGuard.nonceHeader] = dpop.nonces.current }
        return answer
    }
}
