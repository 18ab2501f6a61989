/// Why an outbound exchange produced no HTTP response. Stable codes (`code`) are documented in docs/errors.md.
public enum HTTPClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The total or connect timeout elapsed.
    case timeout
    /// Nothing accepted the TCP connection (closed port, host down, firewall reject).
    case connectionRefused(host: String)
    /// The host (or proxy) name did not resolve.
    case dnsFailure(host: String)
    /// The TLS handshake or certificate verification failed; the reason is libcurl's.
    case tls(reason: String)
    /// The body exceeded the configured cap; the transfer was abandoned.
    case responseTooLarge(limit: Int)
    /// More redirects than allowed, or a redirect while redirects are off and a 3xx was not wanted.
    case tooManyRedirects
    /// The URL is malformed or uses a scheme other than http/https.
    case invalidURL
    /// The connection closed before the whole response arrived (fewer bytes than announced, or
    /// nothing at all): the peer crashed or was cut off mid-response.
    case incompleteResponse(host: String)
    /// The client was shut down.
    case shutdown
    /// Any other transport failure, with libcurl's code and message.
    case transport(curlCode: Int, reason: String)

    public var code: String {
        switch self {
        case .timeout: "http_timeout"
        case .connectionRefused: "http_connection_refused"
        case .dnsFailure: "http_dns_failure"
        case .tls: "http_tls_failure"
        case .responseTooLarge: "http_response_too_large"
        case .tooManyRedirects: "http_too_many_redirects"
        case .invalidURL: "http_invalid_url"
        case .incompleteResponse: "http_incomplete_response"
        case .shutdown: "http_client_shutdown"
        case .transport: "http_transport_failure"
        }
    }

    public var description: String {
        switch self {
        case .timeout: "\(code): the request timed out"
        case .connectionRefused(let host): "\(code): connection to \(host) refused"
        case .dnsFailure(let host): "\(code): could not resolve \(host)"
        case .tls(let reason): "\(code): \(reason)"
        case .responseTooLarge(let limit): "\(code): response larger than \(limit) bytes"
        case .tooManyRedirects: "\(code): too many redirects"
        case .invalidURL: "\(code): invalid or unsupported URL"
        case .incompleteResponse(let host): "\(code): \(host) closed the connection before the whole response arrived"
        case .shutdown: "\(code): the HTTP client is shut down"
        case .transport(let curlCode, let reason): "\(code): curl error \(curlCode): \(reason)"
        }
    }
}
