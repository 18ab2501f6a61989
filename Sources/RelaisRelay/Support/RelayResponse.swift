import HTTPTypes
import Hummingbird
import NIOCore
import RelaisJOSE
import RelaisServer

/// The response shapes the relay's routes build: JSON (never cached unless public), redirects and
/// pages for people (``PageRenderer``).
enum RelayResponse {
    static func json(_ status: HTTPResponse.Status, _ value: JSONValue, headers extra: HTTPFields = [:]) -> Response {
        json(status, serialized: value.serialized(), headers: extra)
    }

    static func json(_ status: HTTPResponse.Status, serialized body: [UInt8], headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        if headers.isEmpty {
            headers = jsonHeaders  // shared: no field built or searched per response
        } else {
            for field in jsonHeaders { headers[field.name] = field.value }
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    private static let jsonHeaders: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store", .pragma: "no-cache"]

    /// A public document (metadata, keys) that caches may keep for five minutes.
    static func publicDocument(_ body: [UInt8], contentType: String, maxAge: Int = 300) -> Response {
        Response(status: .ok, headers: [.contentType: contentType, .cacheControl: "public, max-age=\(maxAge)"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .found, headers: [.location: location, .cacheControl: "no-store"])
    }

    /// An empty success that must not be cached (revocation, logout).
    static func done(_ status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.cacheControl: "no-store"])
    }

    /// A page of Relais' own for people, in the request's language and the operator's look
    /// (``PageContext``); `body` is HTML the caller has escaped.
    static func html(_ status: HTTPResponse.Status, title: String, body: String) -> Response {
        PageContext.now.render(status, title: title, content: body)
    }
}

extension HTTPField.Name {
    static let xFrameOptions = Self("X-Frame-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
}

extension HTTPField.Name {
    static let pragma = Self("Pragma")!
}
