import Hummingbird
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Relais' browser cookies are `__Host-` and Secure over https, and plainly named without Secure
/// over http, where Safari and WKWebView would drop a Secure cookie (WebKit bug 281149).
@Suite(.tags(.fast)) struct BrowserCookiesTests {
    @Test func httpsGivesHostPrefixedSecureCookies() {
        for issuer in ["https://relais.example.fr", "HTTPS://relais.example.fr/base", "https://127.0.0.1:8443"] {
            let cookies = BrowserCookies(issuer: issuer)
            #expect(cookies.secure, "\(issuer)")
            #expect(cookies.session == "__Host-relais-session" && cookies.signIn == "__Host-relais-signin")
            let cookie = cookies.cookie(cookies.session, value: "v", maxAge: 60)
            #expect(cookie.secure && cookie.httpOnly && cookie.path == "/" && cookie.domain == nil && cookie.sameSite == .lax)
        }
    }

    @Test func plainHTTPGivesUnprefixedCookiesWithoutSecure() {
        for issuer in ["http://127.0.0.1:8080", "http://localhost", "http://[::1]:8080", "http://192.168.1.20:8080", "https:/", "httpsx://a"] {
            let cookies = BrowserCookies(issuer: issuer)
            #expect(!cookies.secure, "\(issuer)")
            #expect(cookies.session == "relais-session" && cookies.signIn == "relais-signin")
            let cookie = cookies.cookie(cookies.signIn, value: "v", maxAge: 60)
            #expect(!cookie.secure && cookie.httpOnly && cookie.path == "/" && cookie.sameSite == .lax)
        }
    }
}
