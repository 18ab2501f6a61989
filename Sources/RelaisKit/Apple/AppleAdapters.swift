#if canImport(AuthenticationServices) && (os(iOS) || os(macOS))
public import Foundation
public import AuthenticationServices

/// `ASWebAuthenticationSession`, the system browser sheet: its Cancel is ``RelaisKitErrorCode/cancelled``.
public struct SystemWebAuthenticator: WebAuthenticator {
    /// The registered redirect URI (`fr.example.app:/oauth2redirect`).
    public let redirectURI: String
    /// The window the sheet is presented on.
    public let anchor: @MainActor @Sendable () -> ASPresentationAnchor

    public init(redirectURI: String, anchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor) {
        self.redirectURI = redirectURI
        self.anchor = anchor
    }

    public func begin() async throws -> any WebAuthenticationSession { Session(redirectURI: redirectURI, anchor: anchor) }

    struct Session: WebAuthenticationSession {
        let redirectURI: String
        let anchor: @MainActor @Sendable () -> ASPresentationAnchor

        func run(authorizationURL: URL) async throws -> URL {
            try await present(authorizationURL, scheme: URL(string: redirectURI)?.scheme)
        }

        @MainActor
        private func present(_ url: URL, scheme: String?) async throws -> URL {
            let holder = Holder(anchor: anchor())
            return try await withCheckedThrowingContinuation { continuation in
                let session = ASWebAuthenticationSession(url: url, callbackURLScheme: scheme) { url, error in
                    holder.session = nil  // the session and the anchor provider live until here
                    if let url { return continuation.resume(returning: url) }
                    let cancelled = (error as? ASWebAuthenticationSessionError)?.code == .canceledLogin
                    continuation.resume(throwing: RelaisKitError(cancelled ? .cancelled : .network, error?.localizedDescription ?? "no redirect"))
                }
                session.presentationContextProvider = holder
                holder.session = session
                if !session.start() {
                    holder.session = nil
                    continuation.resume(throwing: RelaisKitError(.network, "the browser sheet could not start"))
                }
            }
        }
    }

    final class Holder: NSObject, ASWebAuthenticationPresentationContextProviding {
        let anchor: ASPresentationAnchor
        var session: ASWebAuthenticationSession?
        init(anchor: ASPresentationAnchor) { self.anchor = anchor }
        func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor { anchor }
    }
}
#endif

#if canImport(DeviceCheck) && os(iOS)
import Foundation
import DeviceCheck

/// `DCAppAttestService.shared`, as ``AppAttestService``: `DCError.invalidKey` becomes
/// ``RelaisKitErrorCode/appAttestInvalidKey``, any other failure ``RelaisKitErrorCode/attestationRefused``.
public struct DeviceCheckAppAttestService: AppAttestService {
    public init() {}
    public var isSupported: Bool { DCAppAttestService.shared.isSupported }
    public func generateKey() async throws -> String { try await mapped { try await DCAppAttestService.shared.generateKey() } }
    public func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data {
        try await mapped { try await DCAppAttestService.shared.attestKey(keyID, clientDataHash: clientDataHash) }
    }
    public func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data {
        try await mapped { try await DCAppAttestService.shared.generateAssertion(keyID, clientDataHash: clientDataHash) }
    }

    private func mapped<T>(_ call: () async throws -> T) async throws -> T {
        do { return try await call() } catch let error as DCError where error.code == .invalidKey {
            throw RelaisKitError(.appAttestInvalidKey, "App Attest no longer has this key")
        } catch {
            throw RelaisKitError(.attestationRefused, "App Attest: \(error.localizedDescription)")
        }
    }
}
#endif
