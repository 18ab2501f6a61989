import Logging
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// One `grant_type` of `POST /token`. `TokenRoute` has read the form, found the app, and checked
/// its attestation and DPoP proof; the grant reads its own parameters and answers with the tokens.
/// A new grant is one type conforming to this and one entry in `Relay`'s `TokenGrants`
/// (docs/extending.md).
protocol TokenGrant: Sendable {
    /// The `grant_type` value, as `/token` takes it and the metadata lists it.
    static var grantType: String { get }

    /// Whether `grant_types_supported` lists the grant for these apps.
    func isOffered(to apps: [AppSettings]) -> Bool

    /// The token response; throws a `RelayError` (an OAuth error) to refuse.
    func answer(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue
}

extension TokenGrant {
    func isOffered(to apps: [AppSettings]) -> Bool { true }
}

/// The grants `/token` answers, in the order the metadata and the `unsupported_grant_type`
/// refusal list them.
struct TokenGrants: Sendable {
    let grants: [any TokenGrant]

    init(_ grants: [any TokenGrant]) { self.grants = grants }

    subscript(grantType: String) -> (any TokenGrant)? { grants.first { type(of: $0).grantType == grantType } }

    /// `grant_types_supported`: the grants some app may use.
    func offered(to apps: [AppSettings]) -> [String] { grants.filter { $0.isOffered(to: apps) }.map { type(of: $0).grantType } }

    /// The refusal of any other `grant_type`: "grant_type must be a, b or c".
    var unsupported: RelayError {
        let types = grants.map { type(of: $0).grantType }
        let listed = types.count > 1 ? types.dropLast().joined(separator: ", ") + " or " + types[types.count - 1] : types.joined()
        return RelayError(.unsupportedGrantType, "grant_type must be \(listed)")
    }
}

/// Who asks at `/token`, as the route checked them: the app, and the keys its proofs were made by.
/// What a grant's decider knows of the requester beyond the grant's own parameters.
struct TokenRequester: Sendable {
    var clientID: String
    /// The thumbprint of the DPoP proof's key (RFC 9449), nil without a proof.
    var proofKey: String?
    /// The attested app instance and its instance key, nil without attestation.
    var attested: ClientAttested?
}

extension TokenRequester {
    init(app: AppSettings, proof: DPoPProof?, attested: ClientAttested?) {
        self.init(clientID: app.clientID, proofKey: proof?.thumbprint, attested: attested)
    }
}
