#if canImport(AuthenticationServices) && os(iOS) || canImport(AuthenticationServices) && os(macOS)
public import Foundation
public import AuthenticationServices

/// `ASWebAuthenticationSession`, the system browser sheet: its Cancel is ``RelaisKitErrorCode/cancelled``.
@available(iOS 15, macOS 12, *)
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

        @MainActor
        func run(authorizationURL: URL) async throws -> URL {
            let scheme = URL(string: redirectURI)?.scheme
            let provider = AnchorProvider(anchor: anchor())
            return try await withCheckedThrowingContinuation { continuation in
                let session = ASWebAuthenticationSession(url: authorizationURL, callbackURLScheme: scheme) { url, error in
                    if let url { continuation.resume(returning: url); return }
                    let cancelled = (error as? ASWebAuthenticationSessionError)?.code == .canceledLogin
                    continuation.resume(throwing: RelaisKitError(cancelled ? .cancelled : .network, error?.localizedDescription ?? "no redirect"))
                }
                session.presentationContextProvider = provider
                session.prefersEphemeralWebBrowserSession = false
                session.start()
            }
        }
    }

    final class AnchorProvider: NSObject, ASWebAuthenticationPresentationContextProviding {
        let anchor: ASPresentationAnchor
        init(anchor: ASPresentationAnchor) { self.anchor = anchor }
        func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor { anchor }
    }
}
#endif

#if canImport(DeviceCheck) && os(iOS)
public import DeviceCheck

/// `DCAppAttestService.shared`, as ``AppAttestService``: `DCError.invalidKey` becomes
/// ``RelaisKitErrorCode/appAttestInvalidKey``.
@available(iOS 15, *)
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
