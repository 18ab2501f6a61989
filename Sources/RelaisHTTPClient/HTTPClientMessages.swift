import RelaisCrypto

/// An outbound request. URLs must be `http` or `https`; other schemes are refused by libcurl.
public struct HTTPClientRequest: Sendable {
    public enum Method: String, Sendable {
        case get = "GET", post = "POST", put = "PUT", delete = "DELETE", head = "HEAD", patch = "PATCH"
    }

    public var method: Method
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    /// Overrides the client's total timeout for this request only.
    public var timeout: Duration?
    /// What the request is for, as its span is named when tracing is on (`provider token`); the
    /// method otherwise.
    public var operation: String?

    public init(
        method: Method = .get,
        url: String,
        headers: [(name: String, value: String)] = [],
        body: [UInt8]? = nil,
        timeout: Duration? = nil,
        operation: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.operation = operation
    }

    /// A form-encoded POST (`application/x-www-form-urlencoded`), the shape of every OAuth token request.
    public static func form(url: String, fields: [(String, String)], headers: [(name: String, value: String)] = [], operation: String? = nil) -> Self {
        Self(
            method: .post,
            url: url,
            headers: [(name: "Content-Type", value: "application/x-www-form-urlencoded")] + headers,
            body: FormParameters.encodedBytes(fields),
            operation: operation
        )
    }
}

/// A response with any status: a 4xx or 5xx is data for the caller to interpret, not an error.
public struct HTTPClientResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// Connections libcurl opened for this exchange: 0 when an idle keep-alive connection was reused.
    public var newConnections: Int

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8], newConnections: Int) {
        self.status = status
        self.headers = headers
        self.body = body
        self.newConnections = newConnections
    }

    /// The first header with this name, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

public enum FormEncoding {
    /// application/x-www-form-urlencoded escaping: unreserved characters stay, space becomes '+'.
    public static func escape(_ string: String) -> String {
        var input = string
        let plain = input.withUTF8 { bytes in bytes.allSatisfy(ByteScan.isUnreserved) }
        // Codes, states, verifiers and client ids are unreserved characters only: returned as
        // they are, without a new string (its allocation and UTF-8 check cost more than the scan).
        if plain { return string }
        var output: [UInt8] = []
        escape(string, into: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// The same, appended to `output`. Runs of unreserved characters (all of a code or a token)
    /// are copied whole: appending byte by byte checked the array's room for each.
    public static func escape(_ string: String, into output: inout [UInt8]) {
        let hex: StaticString = "0123456789ABCDEF"
        var input = string
        input.withUTF8 { bytes in
            var start = 0
            for index in bytes.indices where !ByteScan.isUnreserved(bytes[index]) {
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                let byte = bytes[index]
                if byte == UInt8(ascii: " ") {
                    output.append(UInt8(ascii: "+"))
                } else {
                    output.append(UInt8(ascii: "%"))
                    output.append(hex.utf8Start[Int(byte >> 4)])
                    output.append(hex.utf8Start[Int(byte & 0x0f)])
                }
                start = index + 1
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
    }
}
