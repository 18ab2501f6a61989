import Hummingbird
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// `POST /admin/sessions/revoke` (`sub`, optional `provider`): ends every session of a person, as
/// `relais sessions revoke` does, for a support tool or an account-deletion job. Off unless
/// `admin.token_file` is set; the caller sends that token as `Authorization: Bearer`, compared in
/// constant time, and attempts count against the client address's rate limit.
struct AdminSessionRoutes: RelayRoutes {
    let token: String?
    let providers: [String]
    let sessions: RelayStore
    let limiter: RateLimiter
    let events: SecurityEventLog

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        guard let token else { return }  // off: 404 like any unknown path
        router.surface(.json, limitedBy: limiter).post("/admin/sessions/revoke") { request, context in try await revoke(request, token: token, context: context) }
    }

    private func revoke(_ request: Request, token: String, context: RelaisRequestContext) async throws -> Response {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
            ConstantTime.equals(String(header.dropFirst("bearer ".count)), token)
        else {
            context.logger.warning("admin call refused: wrong or missing credential")
            events.record(.adminRefused, reason: RelayError.Code.invalidToken.rawValue)
            throw RelayError.invalidToken("the admin credential is missing or wrong")
        }
        guard let form = try await FormParameters.body(of: request, limit: 4096), form.firstRepeatedName == nil else {
            throw RelayError.invalidRequest("the form cannot be read or repeats a parameter")
        }
        guard let subject = form["sub"], !subject.isEmpty else { throw RelayError.invalidRequest("sub is missing") }
        let chosen = form["provider"].map { [$0] } ?? providers
        if let unknown = chosen.first(where: { !providers.contains($0) }) {
            throw RelayError.invalidRequest("provider '\(unknown)' is not configured")
        }
        var ended = 0
        for provider in chosen { ended += try await sessions.endAll(ofSubject: subject, provider: provider) }
        RelayMetrics.sessionsEnded(ended, reason: .revoked)
        context.logger.notice("admin ended a person's sessions", metadata: ["sessions": "\(ended)"])
        events.record(.adminSessionsRevoked, provider: form["provider"], subject: subject, [("sessions", String(ended))])
        return RelayResponse.json(.ok, serialized: JSONValue.object(["revoked": .number(Double(ended))]).serialized())
    }
}
