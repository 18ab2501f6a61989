import RelaisConfig
import RelaisJOSE

/// A provider's endpoints, from its discovery document (OpenID Connect Discovery 1.0) and the
/// configuration, which wins where it names an endpoint.
public struct ProviderMetadata: Sendable, Equatable {
    public var issuer: String
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    public var userinfoEndpoint: String?
    public var jwksURI: String?
    public var endSessionEndpoint: String?
    /// RFC 9207 §3: the provider says its callbacks always carry `iss`.
    public var sendsCallbackIssuer = false

    /// Endpoints from the configuration alone (discovery off).
    init?(settings: ProviderSettings) {
        guard let authorization = settings.authorizationEndpoint, let token = settings.tokenEndpoint else { return nil }
        issuer = settings.issuer
        authorizationEndpoint = authorization
        tokenEndpoint = token
        userinfoEndpoint = settings.userinfoEndpoint
        jwksURI = settings.jwksURI
        endSessionEndpoint = settings.endSessionEndpoint
    }

    private static func isHTTPS(_ url: String) -> Bool { url.utf8.prefix(8).elementsEqual("https://".utf8) { $0 | 0x20 == $1 | 0x20 } }

    /// Reads a discovery document; its `issuer` must be the configured one exactly (Discovery §4.3),
    /// or a document from elsewhere could redirect sign-ins.
    init(discovery document: [String: JSONValue], settings: ProviderSettings) throws(UpstreamError) {
        guard document["issuer"]?.stringValue == settings.issuer else {
            throw .invalidResponse("the discovery document names issuer '\(document["issuer"]?.stringValue ?? "(none)")', not '\(settings.issuer)'")
        }
        func endpoint(_ name: String) -> String? { document[name]?.stringValue }
        guard let authorization = settings.authorizationEndpoint ?? endpoint("authorization_endpoint"),
            let token = settings.tokenEndpoint ?? endpoint("token_endpoint")
        else {
            throw .invalidResponse("the discovery document lacks authorization_endpoint or token_endpoint")
        }
        issuer = settings.issuer
        authorizationEndpoint = authorization
        tokenEndpoint = token
        userinfoEndpoint = settings.userinfoEndpoint ?? endpoint("userinfo_endpoint")
        jwksURI = settings.jwksURI ?? endpoint("jwks_uri")
        endSessionEndpoint = settings.endSessionEndpoint ?? endpoint("end_session_endpoint")
        sendsCallbackIssuer = document["authorization_response_iss_parameter_supported"] == .bool(true)
        // The document speaks for an https issuer: an endpoint it names in clear would carry the
        // client secret, the code and the tokens where anyone on the path reads them.
        if Self.isHTTPS(settings.issuer) {
            for (name, url) in [
                ("authorization_endpoint", authorizationEndpoint), ("token_endpoint", tokenEndpoint), ("userinfo_endpoint", userinfoEndpoint),
                ("jwks_uri", jwksURI), ("end_session_endpoint", endSessionEndpoint),
            ] {
                if let url, !Self.isHTTPS(url) { throw .invalidResponse("the discovery document's \(name) is not https, though the issuer is") }
            }
        }
    }
}
