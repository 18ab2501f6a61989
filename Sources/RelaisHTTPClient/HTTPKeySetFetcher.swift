public import RelaisJOSE

/// Fetches JWKS documents for ``JWKSCache`` through the libcurl client.
public struct HTTPKeySetFetcher: JWKSFetcher {
    let client: HTTPClient
    let operation: String

    /// - Parameter operation: the span name of each fetch, when tracing is on.
    public init(client: HTTPClient, operation: String = "jwks") {
        self.client = client
        self.operation = operation
    }

    public func fetchKeySet(from url: String) async throws -> [UInt8] {
        let response = try await client.send(HTTPClientRequest(url: url, headers: [(name: "Accept", value: "application/json, application/jwk-set+json")], operation: operation))
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
