import Hummingbird
import RelaisConfig
import RelaisHTTPClient
import RelaisServer

/// How every app's POST starts (`/token`, `/device_authorization`, `/attest/*`): the form, with no
/// name repeated (RFC 6749 §3.1), the app it names (``PublicClient``), and that app's share of the
/// rate limit.
struct ClientForm: Sendable {
    /// An app's form is a few short fields, a platform proof of some kilobytes at the most.
    static let limit = 64 * 1024

    let form: FormParameters
    let app: AppSettings

    /// `check` sees the form before the app is looked up: `/token` says a missing `grant_type` first.
    static func read(
        _ request: Request, _ context: RelaisRequestContext, apps: [String: AppSettings], limiter: RateLimiter,
        check: (FormParameters) throws -> Void = { _ in }
    ) async throws -> ClientForm {
        let form = try await Self.form(request)
        try check(form)
        let client = try PublicClient(request, form)
        guard let app = apps[client.id] else { throw client.unknown }
        if let limited = await limiter.check(clientID: client.id, logger: context.logger) { throw limited }
        return ClientForm(form: form, app: app)
    }

    /// The body as a form of at most ``limit`` bytes in which no name is repeated.
    static func form(_ request: Request) async throws -> FormParameters {
        guard let form = try await FormParameters.body(of: request, limit: limit) else {
            throw RelayError.invalidRequest("the body must be an application/x-www-form-urlencoded form of at most \(FormParameters.maxFields) fields")
        }
        if let repeated = form.firstRepeatedName { throw RelayError.invalidRequest("the parameter '\(repeated)' is given more than once") }
        return form
    }
}
