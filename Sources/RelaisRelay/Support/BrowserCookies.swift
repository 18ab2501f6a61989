import Hummingbird
import RelaisCrypto

/// The cookies Relais sets in a browser: the web session a session code opens, and the binding of
/// a device sign-in to the browser that starts it. Both HttpOnly, SameSite=Lax, Path=/, no Domain.
///
/// Served over https (every production deployment but a loopback one) they are `__Host-` cookies:
/// Secure, so only this host over TLS ever receives them. Over plain http (`make demo`, a
/// development relay on a LAN address) a Secure cookie is not kept by every browser: Safari and
/// WKWebView, so the iOS Simulator's webviews, refuse them on http://127.0.0.1 and http://localhost
/// (WebKit bug 281149), and every browser refuses them on a LAN address. There the same cookies go
/// without `Secure` and so without the prefix, which requires it: `relais-session`, `relais-signin`.
struct BrowserCookies: Sendable {
    /// Whether the relay's public base URL is https.
    let secure: Bool

    init(issuer: String) {
        secure = issuer.prefix(8).lowercased() == "https://"
    }

    /// The web session cookie's name.
    var session: String { secure ? "__Host-relais-session" : "relais-session" }

    /// The device sign-in's browser binding cookie's name.
    var signIn: String { secure ? "__Host-relais-signin" : "relais-signin" }

    /// A cookie of Relais' with `name`, lasting `maxAge` seconds.
    func cookie(_ name: String, value: String, maxAge: Int) -> Cookie {
        Cookie(name: name, value: value, maxAge: maxAge, path: "/", secure: secure, httpOnly: true, sameSite: .lax)
    }

    /// The device sign-in binding `request` carries, if it has the shape Relais gives it.
    func browserBinding(of request: Request) -> String? {
        guard let value = request.cookies[signIn]?.value, value.utf8.count == 43, Base64URL.decode(value)?.count == 32 else { return nil }
        return value
    }

    /// Whether `request` comes from the browser that started `transaction` (always true for an
    /// app's sign-in, which carries no binding).
    func isSameBrowser(_ request: Request, as transaction: LoginTransaction) -> Bool {
        guard transaction.deviceSID != nil else { return true }
        guard let expected = transaction.browserHash, let binding = browserBinding(of: request) else { return false }
        return ConstantTime.equals(SHA256.hexHash(binding), expected)
    }
}
