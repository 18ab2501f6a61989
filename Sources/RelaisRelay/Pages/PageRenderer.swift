import HTTPTypes
import Hummingbird
import NIOCore
import RelaisConfig
import RelaisCrypto
import RelaisServer

/// Relais' pages for people, in the operator's look (`pages.*`): one template (Relais' own, or
/// `pages.template_file`) cut into parts once at start-up, so a page is a concatenation.
struct PageRenderer: Sendable {
    let settings: PagesSettings
    private let parts: [Part]

    private enum Part: Sendable {
        case text(String)
        case slot(Slot)
    }

    enum Slot: String, Sendable, CaseIterable {
        case lang, title, style, header, content, footer
    }

    /// Content-Security-Policy of every page. Relais' own template loads nothing but its inline
    /// style (allowed by its hash) and the logo, and runs no script; an operator's template keeps
    /// what cannot break it. `form-action` is left out on purpose: Chrome applies it to the
    /// redirect after a form (to the provider, or an app's custom scheme after a sign-out).
    let contentSecurityPolicy: String
    /// Relais' CSS, made once: every page carries it, and the policy names its hash.
    private let style: String

    init(_ settings: PagesSettings = PagesSettings()) {
        self.settings = settings
        parts = Self.parse(settings.template ?? Self.defaultTemplate)
        style = Self.style(settings)
        if settings.template == nil {
            let images = ["'self'"] + (settings.logoURL.flatMap(Self.origin(of:)).map { [$0] } ?? [])
            contentSecurityPolicy =
                "default-src 'none'; style-src 'sha256-\(Base64.encode(SHA256.hash(style)))'; img-src \(images.joined(separator: " ")); "
                + "base-uri 'none'; frame-ancestors 'none'"
        } else {
            contentSecurityPolicy = "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
        }
    }

    var defaultLanguage: PageLanguage { PageLanguage(settings.defaultLanguage) }

    /// A page: `content` is HTML the caller escaped; the page is never cached, never framed (no
    /// clickjacking of an approval), and sends no `Referer` to another host (a page's address may
    /// carry a session code or an `id_token_hint`; the logo may be on another host). Not
    /// `no-referrer`: a browser without Fetch Metadata would then send its forms with `Origin:
    /// null`, and Relais' own confirmation forms would be refused as another site's.
    func render(_ status: HTTPResponse.Status, title: String, content: String, language: PageLanguage) -> Response {
        let strings = language.strings
        var html = ""
        for part in parts {
            switch part {
            case .text(let text): html += text
            case .slot(.lang): html += language.rawValue
            case .slot(.title): html += HTMLText.escape(title) + " — " + HTMLText.escape(settings.serviceName)
            case .slot(.style): html += style
            case .slot(.header): html += header
            case .slot(.content): html += content
            case .slot(.footer): html += settings.supportURL.map { #"<p><a href="\#(HTMLText.escape($0))">\#(strings[.needHelp])</a></p>"# } ?? ""
            }
        }
        return Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .xFrameOptions: "DENY", .contentSecurityPolicy: contentSecurityPolicy,
                .referrerPolicy: "same-origin", .xContentTypeOptions: "nosniff",
            ],
            body: .init(byteBuffer: ByteBuffer(string: html))
        )
    }

    private var header: String {
        let logo = settings.logoURL.map { #"<img src="\#(HTMLText.escape($0))" alt="" height="40"> "# } ?? ""
        return #"<p class="service">\#(logo)\#(HTMLText.escape(settings.serviceName))</p>"#
    }

    /// `https://host[:port]` of an absolute URL (a logo elsewhere), as a CSP source; nil for a path
    /// on Relais' host, or an authority with user information (no valid source).
    static func origin(of url: String) -> String? {
        guard url.contains("://") else { return nil }
        let origin = SecFetchSite.origin(of: url)
        return origin.contains("@") ? nil : origin
    }

    /// Readable at 320 px, focus always visible, and a field's label above it.
    private static func style(_ settings: PagesSettings) -> String {
        """
        :root{--primary:\(settings.primaryColor)}body{font-family:system-ui,sans-serif;max-width:36rem;margin:0 auto;padding:1rem;line-height:1.5;color:#161616}\
        .service{font-weight:700;display:flex;align-items:center;gap:.5rem;border-bottom:1px solid #ddd;padding-bottom:.5rem}\
        h1{color:var(--primary);font-size:1.5rem}code{background:#eee;padding:.1rem .3rem;overflow-wrap:anywhere}\
        a{color:var(--primary)}label{display:block;font-weight:600;margin:.5rem 0 .25rem}\
        button{font-size:1rem;padding:.6rem 1rem;margin:.3rem .3rem .3rem 0;background:var(--primary);color:#fff;border:1px solid var(--primary);cursor:pointer}\
        button.secondary{background:#fff;color:var(--primary)}input{font-size:1.2rem;padding:.4rem;letter-spacing:.1rem;max-width:100%}\
        :focus-visible{outline:3px solid #0a76f6;outline-offset:2px}.error{color:#ce0500;font-weight:600}
        """
    }

    static let defaultTemplate = """
        <!doctype html>
        <html lang="{{lang}}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}}</title>
        <style>{{style}}</style>
        </head><body>
        <header>{{header}}</header>
        <main>
        {{content}}
        </main>
        <footer>{{footer}}</footer>
        </body></html>
        """

    /// The template cut at its `{{slot}}`s, once; an unknown `{{name}}` stays as text.
    private static func parse(_ template: String) -> [Part] {
        var parts: [Part] = []
        var rest = Substring(template)
        while let open = rest.firstRange(of: "{{"), let close = rest[open.upperBound...].firstRange(of: "}}") {
            let name = String(rest[open.upperBound..<close.lowerBound])
            if let slot = Slot(rawValue: name) {
                parts.append(.text(String(rest[..<open.lowerBound])))
                parts.append(.slot(slot))
            } else {
                parts.append(.text(String(rest[..<close.upperBound])))
            }
            rest = rest[close.upperBound...]
        }
        parts.append(.text(String(rest)))
        return parts
    }
}

/// The page a request would be answered with: its language, and the operator's renderer. Set for
/// the routes that show pages (``PageContextMiddleware``), narrowed by `/authorize`'s `ui_locales`.
struct PageContext: Sendable {
    var language: PageLanguage
    var renderer: PageRenderer
    /// Where an error page sends the person back to, when the flow has a page of its own (a
    /// device's, at `/device`); nil: back to the app that opened the window.
    var back: String? = nil

    @TaskLocal static var current: PageContext?

    /// Outside a request (a test calling a renderer directly): French, Relais' own look.
    static var now: PageContext { current ?? PageContext(language: .fr, renderer: PageRenderer()) }

    var strings: PageStrings { language.strings }

    func render(_ status: HTTPResponse.Status, title: String, content: String) -> Response {
        renderer.render(status, title: title, content: content, language: language)
    }
}

/// Picks each page request's language (`Accept-Language`, else `pages.default_language`). Only
/// the paths that can answer a page pay for it.
struct PageContextMiddleware: RouterMiddleware {
    typealias Context = RelaisRequestContext
    let renderer: PageRenderer

    static let pagePaths = ["/authorize", "/callback", "/session", "/device", "/logout"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard Self.pagePaths.contains(where: { path.hasPrefix($0) }) else { return try await next(request, context) }
        let language = PageLanguage.negotiate(uiLocales: nil, acceptLanguage: request.headers[.acceptLanguage], fallback: renderer.defaultLanguage)
        let back = path.hasPrefix("/device") ? "/device" : nil
        return try await PageContext.$current.withValue(PageContext(language: language, renderer: renderer, back: back)) { try await next(request, context) }
    }
}
