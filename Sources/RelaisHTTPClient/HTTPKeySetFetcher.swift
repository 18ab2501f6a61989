public import RelaisJOSE

/// Fetches JWKS documents for ``JWKSCache`` through the libcurl client.
public struct HTTPKeySetFetcher: JWKSFetcher {
    let client: HTTPClient

    public init(client: HTTPClient) { self.client = client }

    public func fetchKeySet(from url: String) async throws -> [UInt8] {
        let response = try await client.send(HTTPClientRequest(url: url, headers: [(name: "Accept", value: "application/json, application/jwk-set+json")]))
        guard (200..<300).contains(response.status) else { throw HTTPKeySetFetcherError(url: url, status: response.status) }
        return response.body
    }
}

/// A JWKS endpoint answered with a non-2xx status.
public struct HTTPKeySetFetcherError: Error, CustomStringConvertible {
    public var url: String
    public var status: Int
    public var description: String { "\(url) answered HTTP \(status)" }
}
