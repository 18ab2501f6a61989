public import Foundation

/// What the app tells RelaisKit about itself and Relais.
public struct RelaisConfiguration: Sendable {
    /// Relais' issuer URL (`https://relais.example.fr`), without a trailing slash.
    public var issuer: String
    /// The app's `client_id` at Relais.
    public var clientID: String
    /// The scopes asked for at sign-in.
    public var scopes: [String]
    /// Bind the tokens to the instance key with DPoP (RFC 9449). Required when the app's `dpop` is `required`.
    public var dpop: Bool
    /// Attest the instance at `/token`; nil when the app's `attestation` is `off`.
    public var attestation: AttestationMode?
    /// The label `GET /sessions` shows for this device (`device_name` at `/authorize`).
    public var deviceName: String?

    public init(
        issuer: String, clientID: String, scopes: [String] = ["openid", "profile", "email"], dpop: Bool = true, attestation: AttestationMode? = nil, deviceName: String? = nil
    ) {
        self.issuer = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        self.clientID = clientID
        self.scopes = scopes
        self.dpop = dpop
        self.attestation = attestation
        self.deviceName = deviceName
    }
}

/// The platform parts: each behind a small protocol so that the logic stays in the shared core.
public struct RelaisPlatform: Sendable {
    /// HTTP: ``URLSessionTransport`` by default.
    public var transport: any HTTPTransport
    /// Tokens and the instance key: ``KeychainStorage`` on Apple platforms, ``FileStorage`` on Linux.
    public var storage: any SecureStorage
    /// The instance key's maker: Secure Enclave where there is one, software otherwise.
    public var keys: any ProofKeyFactory
    /// The browser: `SystemWebAuthenticator` on Apple platforms, ``LoopbackWebAuthenticator`` in terminals.
    public var web: any WebAuthenticator
    /// The time for `iat` and token expiry.
    public var clock: any RelaisKitClock
    /// How long to wait between device-grant polls; tests pass one that moves their clock.
    public var wait: @Sendable (TimeInterval) async throws -> Void

    public init(
        transport: any HTTPTransport = URLSessionTransport(), storage: any SecureStorage, keys: any ProofKeyFactory = SoftwareProofKeyFactory(),
        web: any WebAuthenticator, clock: any RelaisKitClock = SystemClock(),
        wait: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(nanoseconds: UInt64($0 * 1_000_000_000)) }
    ) {
        self.transport = transport
        self.storage = storage
        self.keys = keys
        self.web = web
        self.clock = clock
        self.wait = wait
    }
}

/// A device's request as Relais describes it before approval (`POST /device/inspect`).
public struct DeviceRequestContext: Sendable, Equatable {
    /// The app that asks (`demo-desktop`).
    public var clientID: String
    /// The name the service gave that app (`apps.<id>.name`, else the client_id): show it first.
    public var appName: String
    /// When the device asked, and from which address, as Relais saw them: show them next.
    public var requestedAt: Date?
    public var requesterAddress: String?
    /// The device's own label, if it sent one: its own words, not verified. Show it last, marked
    /// as written by the device ("iPhone de Angela – vérification sécurité" is anyone's to write).
    public var device: String?
    /// The scopes the device asks for, space-separated.
    public var scope: String
    /// Seconds before the request expires.
    public var expiresIn: Int
    /// After ``RelaisClient/approveDevice(_:approve:)``: whether it was approved.
    public var approved: Bool?
    /// The normalised user code.
    public var userCode: String
}

/// One of the person's live sessions (`GET /sessions`).
public struct RelaisSession: Sendable, Equatable, Identifiable {
    /// Relais' session id (`sid`), for ``RelaisClient/endSession(id:)``.
    public var id: String
    /// Whether this is the calling app's own session.
    public var current: Bool
    /// A device's session: the id of the app session that approved it (it ends when that one ends).
    public var approvedBy: String?
    /// The app that holds the session.
    public var clientID: String
    /// The device label the app sent (`device_name`).
    public var device: String?
    /// When the person signed in.
    public var createdAt: Date
    /// The last refresh.
    public var lastUsedAt: Date
    /// The sign-in's level.
    public var acr: String?
    /// How the app instance attested, if it did.
    public var attested: String?
    /// When the session ends at the latest.
    public var expiresAt: Date
}

/// A web page opened signed in (`POST /session_code`).
public struct WebSessionLink: Sendable, Equatable {
    /// Open this URL in the webview at once: the code in it lives 60 s and serves once.
    public var url: URL
    /// Where Relais sends the webview after setting its cookie.
    public var target: String
}

/// What a device shows while it waits for approval (RFC 8628).
public struct DeviceCode: Sendable, Equatable {
    /// The code to show (`XXXX-XXXX`).
    public var userCode: String
    /// Where a person types the code.
    public var verificationURI: String
    /// The link with the code in it, for a QR code.
    public var verificationURIComplete: String?
    /// Seconds before the code expires.
    public var expiresIn: Int
    /// Seconds between polls.
    public var interval: Int
}
