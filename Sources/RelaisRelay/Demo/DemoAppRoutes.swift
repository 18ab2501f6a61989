import Hummingbird
import RelaisConfig
import RelaisJOSE
import RelaisServer

/// A tiny "app" for `make demo` (development only): it plays a mobile app's part in a browser —
/// PKCE, /authorize, the code exchange, /userinfo — so a person can click through a sign-in.
/// It is served for the first app that registers `{public_base_url}/demo/callback`. When that app
/// uses attestation and DPoP and the development attester is on, the page can also play an attested
/// app: a WebCrypto key as the instance key, `/attest/dev`, `dpop_jkt`, the attestation and PoP at
/// `/token`, DPoP proofs at `/token` and `/userinfo`.
struct DemoAppRoutes: RelayRoutes {
    let issuer: String
    let apps: [AppSettings]
    let providers: [ProviderSettings]
    let devAttester: Bool
    let webSessions: WebSessionAuthenticator
    let vault: SessionVault

    /// The web page the demo opens through a session code: it shows whom its cookie signs in.
    static let webPath = "/demo/web"

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let redirect = issuer + "/demo/callback"
        guard let app = apps.first(where: { $0.redirectURIs.contains(redirect) }) else { return }
        let mobile = devAttester && app.attestation != .off && app.dpop != .off
        let byID = Dictionary(providers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let page = DemoAppPage(
            issuer: issuer, clientID: app.clientID, redirectURI: redirect, scopes: app.scopes, providers: app.providers.compactMap { byID[$0] }, mobile: mobile
        ).html()
        let html: @Sendable (Request, RelaisRequestContext) -> Response = { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"], body: .init(byteBuffer: .init(string: page)))
        }
        router.get("/demo", use: html)
        router.get("/demo/callback", use: html)
        router.surface(.page).get(RouterPath(Self.webPath)) { request, _ in try await webPage(request) }
    }

    /// A page behind the web session cookie, as a web app behind the gateway would be.
    private func webPage(_ request: Request) async throws -> Response {
        let (_, session) = try await webSessions.authenticate(request)
        let identity = await vault.openIdentityAfterSync(session.sealedIdentity)
        let name = [identity?.claims["given_name"]?.stringValue, identity?.claims["family_name"]?.stringValue].compactMap { $0 }.joined(separator: " ")
        let html = """
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — page web</title>
            <style>body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#161616} h1{font-size:1.4rem;color:#000091}</style>
            </head><body>
            <h1>Page web de démonstration</h1>
            <p id="web-welcome">Connecté·e sur le web : \(HTMLText.escape(name.isEmpty ? session.subject : name))</p>
            <p lang="en">This page was opened from the app's tokens through a session code: the browser holds Relais' web session
            cookie (<code>\(webSessions.cookies.session)</code>), tied to the app's session
            (<code>client_id=\(HTMLText.escape(session.clientID))</code>, acr <code id="web-acr">\(HTMLText.escape(session.acr ?? ""))</code>).
            Signing out in the app ends it.</p>
            </body></html>
            """
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"], body: .init(byteBuffer: .init(string: html)))
    }

    /// A JSON string is a JavaScript string literal; `<`, `>` and `&` are escaped on top so no
    /// value can close the script element.
    static func jsString(_ text: String) -> String {
        jsValue(.string(text))
    }

    /// A JSON value as a JavaScript literal, escaped likewise.
    static func jsValue(_ value: JSONValue) -> String {
        String(decoding: value.serialized(), as: UTF8.self)
            .replacingAll("<", "\\u003c").replacingAll(">", "\\u003e").replacingAll("&", "\\u0026")
    }
}

extension String {
    fileprivate func replacingAll(_ target: Character, _ replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
