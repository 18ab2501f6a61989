public import Foundation

/// What the app knows about its Relais session, without any token.
public struct SessionSummary: Sendable, Equatable, Codable {
    /// The authentication level of the sign-in (`eidas1`, `eidas2`…).
    public var acr: String?
    /// When the current access token expires.
    public var accessTokenExpiresAt: Date
    /// The RFC 7638 thumbprint of the key the tokens are bound to (DPoP), or nil for bearer tokens.
    public var dpopThumbprint: String?
    /// How the instance attested (`dev`, `ios`…), or nil.
    public var attested: String?
    /// Relais' session id (`sid`), as `GET /sessions` lists it.
    public var sessionID: String?

    public init(acr: String?, accessTokenExpiresAt: Date, dpopThumbprint: String?, attested: String?, sessionID: String?) {
        self.acr = acr
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.dpopThumbprint = dpopThumbprint
        self.attested = attested
        self.sessionID = sessionID
    }
}

/// The client's state. Every change is published on ``RelaisClient/states``.
public enum ClientState: Sendable, Equatable {
    /// No session: show the sign-in screen.
    case signedOut
    /// The browser is open at Relais and the provider.
    case authorizing
    /// The browser came back with a code; the app redeems it at `/token`.
    case exchangingCode
    /// Tokens are held and usable.
    case signedIn(SessionSummary)
    /// A refresh is under way; calls wait for it.
    case refreshing(SessionSummary)
    /// A resource asked for a higher level (RFC 9470): the session is kept, and a sign-in with
    /// this `acr` (``RelaisClient/signIn(acr:provider:maxAge:)``) steps it up.
    case stepUpRequired(acr: String, session: SessionSummary)
    /// Sign-out is under way.
    case signingOut
    /// The secure storage is locked (before the first unlock after a restart). The session is
    /// kept; ``RelaisClient/restore()`` again when the device is unlocked.
    case storageLocked
    /// The last operation ended the session or failed before there was one; ``RelaisKitError/code``
    /// says why. Show the sign-in screen, with the message the code calls for.
    case failed(RelaisKitError)
}

/// What happens to the client: the input of ``ClientState/next(_:)``.
public enum ClientEvent: Sendable, Equatable {
    case restored(SessionSummary?)
    case storageLocked
    case signInStarted
    case callbackReceived
    case tokensReceived(SessionSummary)
    case refreshStarted
    case refreshed(SessionSummary)
    case stepUpDemanded(acr: String)
    /// A sign-in (a step-up) failed while a session was held: the session stays.
    case signInAbandoned(SessionSummary)
    case signOutStarted
    case signedOut
    case failed(RelaisKitError)
}

extension ClientState {
    /// The session summary, in every state that holds a session.
    public var session: SessionSummary? {
        switch self {
        case .signedIn(let session), .refreshing(let session), .stepUpRequired(_, let session): session
        default: nil
        }
    }

    /// The error code of a failed state, as docs/client.md lists it.
    public var code: String {
        switch self {
        case .signedOut: "signed_out"
        case .authorizing: "authorizing"
        case .exchangingCode: "exchanging_code"
        case .signedIn: "signed_in"
        case .refreshing: "refreshing"
        case .stepUpRequired: "step_up_required"
        case .signingOut: "signing_out"
        case .storageLocked: "storage_locked"
        case .failed(let error): "failed:" + error.code.rawValue
        }
    }

    /// The transition function: pure, so every pair is checked by a table (docs/client.md).
    ///
    /// A failure that keeps the session (network, a Relais refusal of one call, a cancelled
    /// step-up) returns to the session's state; one that ends it (``RelaisKitError/keepsSession``
    /// false) becomes ``failed(_:)``. A locked storage is never a sign-out.
    public func next(_ event: ClientEvent) -> ClientState {
        switch (self, event) {
        case (_, .restored(let session)): return session.map(ClientState.signedIn) ?? .signedOut
        case (_, .storageLocked): return .storageLocked
        case (_, .signInStarted): return .authorizing
        case (.authorizing, .callbackReceived): return .exchangingCode
        case (_, .tokensReceived(let session)): return .signedIn(session)
        case (.signedIn(let session), .refreshStarted), (.stepUpRequired(_, let session), .refreshStarted), (.refreshing(let session), .refreshStarted):
            return .refreshing(session)
        case (_, .refreshed(let session)): return .signedIn(session)
        case (_, .stepUpDemanded(let acr)):
            guard let session = self.session else { return self }
            return .stepUpRequired(acr: acr, session: session)
        case (_, .signInAbandoned(let session)): return .signedIn(session)
        case (_, .signOutStarted): return .signingOut
        case (_, .signedOut): return .signedOut
        case (.refreshing(let session), .failed(let error)) where error.keepsSession:
            return error.code == .storageLocked ? .storageLocked : .signedIn(session)
        case (.signedIn, .failed(let error)) where error.keepsSession, (.stepUpRequired, .failed(let error)) where error.keepsSession:
            return error.code == .storageLocked ? .storageLocked : self
        case (.storageLocked, .failed(let error)) where error.code == .storageLocked: return self
        case (_, .failed(let error)): return .failed(error)
        default: return self
        }
    }
}
