public import Foundation

/// Shows the authorization page to the person and returns the redirect that ends it.
///
/// ``begin()`` comes first so that the redirect URI (a loopback port, an app scheme) is known
/// before the authorization URL is built.
public protocol WebAuthenticator: Sendable {
    func begin() async throws -> any WebAuthenticationSession
}

/// One sign-in's browser session.
public protocol WebAuthenticationSession: Sendable {
    /// The `redirect_uri` to send; it must be registered for the app at Relais.
    var redirectURI: String { get }
    /// Opens `authorizationURL` and returns the full redirect URL (with `code` or `error`).
    /// Throws ``RelaisKitErrorCode/cancelled`` when the person closes the browser.
    func run(authorizationURL: URL) async throws -> URL
}
