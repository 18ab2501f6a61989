import Hummingbird
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// `POST /token` for public clients: the form is read and the app identified here (``ClientForm``),
/// its attestation and DPoP proof checked; each grant lives in its own type (``TokenGrant``).
struct TokenRoute: RelayRoutes {
    let apps: [String: AppSettings]
    let limiter: RateLimiter
    let grants: TokenGrants
    let dpop: DPoPGuard
    let attestation: ClientAttestationGuard
    let issuer: String

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        router.surface(.json, limitedBy: limiter).post("/token") { request, context in try await token(request, context: context) }
    }

    private func token(_ request: Request, context: RelaisRequestContext) async throws -> Response {
        let client = try await ClientForm.read(request, context, apps: apps, limiter: limiter) { form in
            guard form["grant_type"] != nil else { throw RelayError.invalidRequest("grant_type is missing") }
        }
        let app = client.app
        guard let grant = grants[client.form["grant_type"] ?? ""] else { throw grants.unsupported }
        let attested = try await attestation.check(request, app: app)
        let proof = try await dpop.tokenRequestProof(request, app: app, url: issuer + "/token")
        let response = try await grant.answer(client.form, app: app, proof: proof, attested: attested, logger: context.logger)
        var answer = RelayResponse.json(.ok, response)
        // RFC 9449 §8: the next nonce comes with every answer, so the app rarely has to retry.
        if app.dpopNonce, app.dpop != .off { answer.headers[DPoPGuard.nonceHeader] = dpop.nonces.current }
        return answer
    }
}
