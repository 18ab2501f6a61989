import HTTPTypes
import Hummingbird
import RelaisConfig
import RelaisHTTPClient

/// Which app a `/token`, `/revoke` or `/device_authorization` request comes from. Apps are public
/// clients: they name themselves with `client_id` in the form, or (RFC 6749 §2.3.1, as
/// requests-oauthlib does) in HTTP Basic with an empty password. Both at once must agree.
struct PublicClient: Sendable, Equatable {
    let id: String
    /// The id came in the `Authorization: Basic` header: refusals of the client then carry the
    /// Basic challenge (RFC 6749 §5.2).
    let viaBasic: Bool

    static let basicChallenge: HTTPFields = [.wwwAuthenticate: #"Basic realm="relais""#]

    init(_ request: Request, _ form: FormParameters) throws {
        try self.init(authorization: request.headers[.authorization], formClientID: form["client_id"])
    }

    /// `authorization` is the request's `Authorization` header; other schemes than Basic are not
    /// client authentication and are left to the endpoint.
    init(authorization: String?, formClientID: String?) throws {
        let formID = formClientID.flatMap { $0.isEmpty ? nil : $0 }
        guard let authorization, IntrospectRoute.isBasic(authorization) else {
            guard let formID else { throw RelayError.invalidRequest("client_id is missing (apps are public clients)") }
            (id, viaBasic) = (formID, false)
            return
        }
        guard let (basicID, password) = IntrospectRoute.basicCredentials(authorization), !basicID.isEmpty else {
            throw RelayError(.invalidClient, "the Basic credentials cannot be read: base64 of client_id, a colon and an empty password", headers: Self.basicChallenge)
        }
        guard password.isEmpty else {
            throw RelayError(.invalidClient, "apps are public clients: the Basic password must be empty (Relais holds no client secret)", headers: Self.basicChallenge)
        }
        if let formID, formID != basicID {
            throw RelayError.invalidRequest("two different client ids in one request: the Basic credentials' and the form's client_id")
        }
        (id, viaBasic) = (basicID, true)
    }

    /// `invalid_client` for an id no app is registered with.
    var unknown: RelayError {
        RelayError(.invalidClient, "no app is registered with this client_id", headers: viaBasic ? Self.basicChallenge : [:])
    }
}
