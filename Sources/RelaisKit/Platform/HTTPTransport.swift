public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An HTTP request as RelaisKit sends it.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `DELETE`…
    public var method: String
    /// The full URL; a DPoP proof names it without query and fragment.
    public var url: URL
    /// Header fields, in order; RelaisKit adds `Authorization` and `DPoP`.
    public var headers: [(name: String, value: String)]
    /// The body, if any.
    public var body: Data?

    public init(method: String = "GET", url: URL, headers: [(name: String, value: String)] = [], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A form POST (`application/x-www-form-urlencoded`).
    public static func form(_ url: URL, _ fields: [(String, String)], headers: [(name: String, value: String)] = []) -> HTTPRequest {
        HTTPRequest(
            method: "POST", url: url, headers: headers + [(name: "Content-Type", value: "application/x-www-form-urlencoded")],
            body: Data(FormEncoding.encode(fields).utf8)
        )
    }
}

/// An HTTP answer.
public struct HTTPResponse: Sendable {
    /// The HTTP status.
    public var status: Int
    /// Header fields as received.
    public var headers: [(name: String, value: String)]
    /// The body as received.
    public var body: Data

    public init(status: Int, headers: [(name: String, value: String)], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of a header, by case-insensitive name.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

/// Sends HTTP requests; redirects are returned, not followed. ``URLSessionTransport`` in apps; tests
/// may put a recording transport in front of it.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// `application/x-www-form-urlencoded`, as Relais reads it.
enum FormEncoding {
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text }

    static func encode(_ fields: [(String, String)]) -> String {
        fields.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    static func decode(_ query: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1 ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
            if fields[name] == nil { fields[name] = value }
        }
        return fields
    }
}

/// The transport on URLSession (FoundationNetworking on Linux). Redirects are not followed:
/// every Relais answer the library acts on is the first one.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// - Parameter timeout: per request, in seconds.
    public init(timeout: TimeInterval = 30) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        session = URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
    }

    deinit { session.finishTasksAndInvalidate() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for header in request.headers { urlRequest.addValue(header.value, forHTTPHeaderField: header.name) }
        return try await withCheckedThrowingContinuation { continuation in
            session.dataTask(with: urlRequest) { data, response, error in
                if let error {
                    continuation.resume(throwing: RelaisKitError(.network, "\(request.method) \(request.url.host ?? ""): \(error.localizedDescription)"))
                    return
                }
                guard let http = response as? HTTPURLResponse else {
                    continuation.resume(throwing: RelaisKitError(.network, "no HTTP answer from \(request.url.host ?? "")"))
                    return
                }
                let headers = http.allHeaderFields.compactMap { key, value -> (name: String, value: String)? in
                    guard let name = key as? String else { return nil }
                    return (name: name, value: "\(value)")
                }
                continuation.resume(returning: HTTPResponse(status: http.statusCode, headers: headers, body: data ?? Data()))
            }.resume()
        }
    }

    private final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
            completionHandler: @escaping @Sendable (URLRequest?) -> Void
        ) {
            completionHandler(nil)
        }
    }
}
