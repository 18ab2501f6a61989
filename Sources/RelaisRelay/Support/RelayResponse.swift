import HTTPTypes
import Hummingbird
import NIOCore
import RelaisJOSE
import RelaisServer

/// The response shapes the relay's routes build: JSON (never cached unless public), redirects and
/// the one HTML error page.
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

    static func page(_ status: HTTPResponse.Status, code: String, message: String) -> Response {
        html(status, title: code, body: """
            <h1>La connexion n'a pas pu aboutir</h1>
            <p id="error-message">\(HTMLText.escape(message))</p>
            <p>Code : <code id="error-code">\(HTMLText.escape(code))</code></p>
            <p>Fermez cette fenêtre et réessayez depuis l'application. / Close this window and try again from the app.</p>
            """)
    }

    /// A page of Relais' own for people; `body` is HTML the caller has escaped. Never cached, never
    /// framed (no clickjacking of the device approval).
    static func html(_ status: HTTPResponse.Status, title: String, body: String) -> Response {
        let html = """
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — \(HTMLText.escape(title))</title>
            <style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem}code{background:#eee;padding:.1rem .3rem}\
            button{font-size:1rem;padding:.6rem 1rem;margin:.3rem .3rem .3rem 0}input{font-size:1.2rem;padding:.4rem;letter-spacing:.1rem}</style>
            </head><body>
            \(body)
            </body></html>
            """
        return Response(
            status: status,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .xFrameOptions: "DENY", .contentSecurityPolicy: "frame-ancestors 'none'"],
            body: .init(byteBuffer: ByteBuffer(string: html))
        )
    }
}

extension HTTPField.Name {
    static let xFrameOptions = Self("X-Frame-Options")!
    static let contentSecurityPolicy = Self("Content-Security-Policy")!
}

extension HTTPField.Name {
    static let pragma = Self("Pragma")!
}
