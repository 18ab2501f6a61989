extension HTTPClientError {
    /// Every code with what it means, for docs/errors.md (`relais errors --markdown`).
    public static let catalogue: [(code: String, meaning: String)] = [
        ("http_timeout", "`http_client.connect_timeout` or `http_client.timeout` (or a per-request timeout) elapsed."),
        ("http_connection_refused", "Nothing accepted the TCP connection (closed port, host down, firewall reject), or the configured proxy refused."),
        ("http_dns_failure", "The host or proxy name did not resolve."),
        ("http_tls_failure", "TLS handshake or certificate verification failed, including a client certificate refused by the server (mutual TLS)."),
        ("http_response_too_large", "The body, or the header lines together, exceeded `http_client.max_response_bytes`; the transfer was abandoned."),
        ("http_too_many_redirects", "More than `http_client.max_redirects` redirects (only with `follow_redirects: true`)."),
        ("http_invalid_url", "Malformed URL, or a scheme other than http/https (file:, ftp:, gopher: … are refused)."),
        (
            "http_incomplete_response",
            "The connection closed before the whole response arrived (fewer bytes than Content-Length announced, or no response at all): the peer crashed or was cut off mid-response."
        ),
        ("http_client_shutdown", "The client was shut down."),
        ("http_transport_failure", "Any other transport failure; the message carries libcurl's code and text."),
    ]
}
