import Hummingbird
import RelaisServer

/// The web session cookie a session code opens in the app's webview: `__Host-` over https (Secure,
/// Path=/, no Domain: only this host ever receives it), HttpOnly, SameSite=Lax (``BrowserCookies``). Its value names the Relais
/// session (`sid.random`, as device codes do; codes and refresh tokens start with it too) and is stored by hash. It is the same
/// session the app's tokens belong to: when that session ends (app logout, revocation, back-channel
/// logout, idle or absolute expiry), the cookie stops working at once.
///
/// Only `/auth?via=cookie|both` reads it. No endpoint that returns tokens, identity or changes
/// state accepts it, so a cross-site request riding on the cookie can do nothing (CSRF).
struct WebSessionAuthenticator: Sendable {
    let sessions: RelayStore
    let cookies: BrowserCookies

    /// The session behind the request's cookie; `.missingToken` without one.
    func authenticate(_ request: Request) async throws(RelayError) -> (sid: String, session: SessionRecord) {
        guard let cookie = request.cookies[cookies.session]?.value, !cookie.isEmpty else {
            throw RelayError(.missingToken, "no access token and no Relais web session cookie")
        }
        guard cookie.utf8.count <= 128, let sid = RelayStore.sessionID(in: cookie) else { throw .invalidToken("the web session cookie is not one Relais set") }
        do {
            guard try await sessions.webSessionIsOpen(cookie), let session = try await sessions.session(sid) else {
                throw RelayError.invalidToken("the web session has ended")
            }
            return (sid, session)
        } catch let error as RelayError {
            throw error
        } catch {
            throw .storeUnavailable
        }
    }

    /// The Set-Cookie for a new web session, lasting as long as its session may.
    func cookie(_ value: String, maxAge: Int) -> Cookie {
        cookies.cookie(cookies.session, value: value, maxAge: maxAge)
    }

    /// The web session cookie `request` carries, if any.
    func cookieValue(in request: Request) -> String? { request.cookies[cookies.session]?.value }
}
