public import RelaisJOSE

/// Fetches JWKS documents for ``JWKSCache`` through the libcurl client.
public struct HTTPKeySetFetcher: JWKSFetcher {
    let client: HTTPClient
    let operation: String
    let timeout: Duration?

    /// - Parameters:
    ///   - operation: the span name of each fetch, when tracing is on.
    ///   - timeout: each fetch's own bound (a provider's `timeout`); nil for the client's.
    public init(client: HTTPClient, operation: String = "jwks", timeout: Duration? = nil) {
        self.client = client
        self.operation = operation
        self.timeout = timeout
    }

    public func fetchKeySet(from url: String) async throws -> [UInt8] {
        let response = try await client.send(
            HTTPClientRequest(url: url, headers: [(name: "Accept", value: "application/json, application/jwk-set+json")], timeout: timeout, operation: operation))
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
