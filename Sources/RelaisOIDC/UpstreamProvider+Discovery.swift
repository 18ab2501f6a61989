import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// Discovery and the authorization request's `claims`: the parts of ``UpstreamProvider`` that read
/// and write the provider's documents.
extension UpstreamProvider {
    /// One fetch of the discovery document.
    func discover() async -> Result<ProviderMetadata, UpstreamError> {
        do throws(UpstreamError) {
            let response = try await send(
                HTTPClientRequest(
                    url: settings.issuer + "/.well-known/openid-configuration", headers: [(name: "Accept", value: "application/json")], operation: "provider discovery"))
            switch response.status {
            case 200: break
            case 429, 500...599: return .failure(.unavailable("discovery answered HTTP \(response.status)"))
            default: return .failure(.invalidResponse("discovery answered HTTP \(response.status)"))
            }
            guard let document = JSONValue.object(from: response.body) else { return .failure(.invalidResponse("the discovery document is not a JSON object")) }
            return .success(try ProviderMetadata(discovery: document, settings: settings))
        } catch {
            return .failure(error)
        }
    }

    /// The `claims` parameter that requires `acr` or a level above it in `order` (OIDC Core §5.5.1.1):
    /// the provider must meet it or refuse, where `acr_values` is only a wish.
    static func essentialACRClaims(_ acr: String, order: [String]) -> String {
        let levels = order.firstIndex(of: acr).map { Array(order[$0...]) } ?? [acr]
        let requirement: JSONValue = .object(["essential": .bool(true), "values": .array(levels.map { .string($0) })])
        return String(decoding: JSONValue.object(["id_token": .object(["acr": requirement])]).serialized(), as: UTF8.self)
    }
}
