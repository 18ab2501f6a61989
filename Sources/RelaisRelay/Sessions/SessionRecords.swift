import FoundationEssentials
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisStore

/// What the relay keeps in the store. Codes and tokens are stored under their SHA-256, never as
/// themselves; identity claims and the provider's id_token travel sealed (`SessionVault`).

/// The app's validated authorization request.
struct AppRequest: Sendable, Equatable {
    var clientID: String
    var redirectURI: String
    /// What the code must be redeemed with.
    var redemption: Redemption
    var state: String?
    var scopes: [String]
    /// The app's own `nonce`, echoed in Relais' id_token.
    var nonce: String?
    /// What Relais asks of the provider on the app's behalf.
    var upstream: Upstream
    /// The label the app gave its device (`device_name`), shown in the person's session list.
    var deviceName: String?

    /// The proofs `/token` asks of whoever redeems the code.
    struct Redemption: Sendable, Equatable {
        /// PKCE (RFC 7636): the verifier must hash to it.
        var codeChallenge: String
        /// RFC 9449 §10: the thumbprint of the DPoP key the code may only be redeemed with.
        var dpopJKT: String?
    }

    struct Upstream: Sendable, Equatable {
        var providerID: String
        var acr: String?
        var forceLogin: Bool
        /// A step-up (RFC 9470) of this session (named by the app's `id_token_hint`): the new
        /// sign-in replaces it only when the person is the same (the identity pivot matches).
        var stepUpOf: String?
        /// The app's `idp_hint`, passed on to providers that take it (FranceConnect, ProConnect).
        var idpHint: String?
        /// The app's `max_age` (OpenID Connect Core §3.1.2.1): the provider's sign-in must be at
        /// most this old, and the id_token then carries `auth_time`.
        var maxAge: Int?
    }

    init(
        clientID: String, redirectURI: String, codeChallenge: String, state: String?, scopes: [String], nonce: String?, providerID: String,
        acr: String?, forceLogin: Bool
    ) {
        self.clientID = clientID
        self.redirectURI = redirectURI
        redemption = Redemption(codeChallenge: codeChallenge)
        self.state = state
        self.scopes = scopes
        self.nonce = nonce
        upstream = Upstream(providerID: providerID, acr: acr, forceLogin: forceLogin)
    }

    // One flat JSON object with Codable's member names, as stored before: sign-ins in flight
    // during an upgrade read either way.
    init?(json: [String: JSONValue]) {
        guard let clientID = json["clientID"]?.stringValue, let redirectURI = json["redirectURI"]?.stringValue,
            let codeChallenge = json["codeChallenge"]?.stringValue, let scopes = json["scopes"]?.arrayValue,
            let providerID = json["providerID"]?.stringValue, let forceLogin = json["forceLogin"]?.boolValue
        else { return nil }
        let scopeNames = scopes.compactMap(\.stringValue)
        guard scopeNames.count == scopes.count else { return nil }
        self.init(
            clientID: clientID, redirectURI: redirectURI, codeChallenge: codeChallenge, state: json["state"]?.stringValue, scopes: scopeNames,
            nonce: json["nonce"]?.stringValue, providerID: providerID, acr: json["acr"]?.stringValue, forceLogin: forceLogin
        )
        redemption.dpopJKT = json["dpopJKT"]?.stringValue
        deviceName = json["deviceName"]?.stringValue
        upstream.stepUpOf = json["stepUpOf"]?.stringValue
        upstream.idpHint = json["idpHint"]?.stringValue
        upstream.maxAge = json["maxAge"]?.numberValue.map { Int($0) }
    }

    var json: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "clientID": .string(clientID), "redirectURI": .string(redirectURI), "codeChallenge": .string(redemption.codeChallenge),
            "scopes": .array(scopes.map { .string($0) }), "providerID": .string(upstream.providerID), "forceLogin": .bool(upstream.forceLogin),
        ]
        object["state"] = state.map { .string($0) }
        object["nonce"] = nonce.map { .string($0) }
        object["dpopJKT"] = redemption.dpopJKT.map { .string($0) }
        object["deviceName"] = deviceName.map { .string($0) }
        object["acr"] = upstream.acr.map { .string($0) }
        object["stepUpOf"] = upstream.stepUpOf.map { .string($0) }
        object["idpHint"] = upstream.idpHint.map { .string($0) }
        object["maxAge"] = upstream.maxAge.map { .number(Double($0)) }
        return object
    }
}

/// Between /authorize and /callback, keyed by the provider `state`.
struct LoginTransaction: JSONRecord, Sendable {
    var app: AppRequest
    var providerNonce: String
    var providerCodeVerifier: String?
    /// A sign-in at `/device` that approves this device request (the session id it will open),
    /// instead of one that returns a code to the app.
    var deviceSID: String?
    /// The hash of the browser cookie set when the sign-in started (``SignInStarter/browserCookie``):
    /// a device sign-in completes only in the browser that started it.
    var browserHash: String?

    init(app: AppRequest, providerNonce: String, providerCodeVerifier: String?, deviceSID: String?, browserHash: String? = nil) {
        self.app = app
        self.providerNonce = providerNonce
        self.providerCodeVerifier = providerCodeVerifier
        self.deviceSID = deviceSID
        self.browserHash = browserHash
    }

    init?(json: [String: JSONValue]) {
        guard let app = json["app"]?.objectValue.flatMap(AppRequest.init(json:)), let nonce = json["providerNonce"]?.stringValue else { return nil }
        self.init(
            app: app, providerNonce: nonce, providerCodeVerifier: json["providerCodeVerifier"]?.stringValue, deviceSID: json["deviceSID"]?.stringValue,
            browserHash: json["browserHash"]?.stringValue
        )
    }

    var json: JSONValue {
        var object: [String: JSONValue] = ["app": .object(app.json), "providerNonce": .string(providerNonce)]
        object["providerCodeVerifier"] = providerCodeVerifier.map { .string($0) }
        object["deviceSID"] = deviceSID.map { .string($0) }
        object["browserHash"] = browserHash.map { .string($0) }
        return .object(object)
    }
}

/// Relais' authorization code: everything /token needs to open the session.
struct RelayCode: JSONRecord, Sendable {
    var app: AppRequest
    var subject: String
    var acr: String?
    var sealedIdentity: String
    /// The provider's `sid`, indexed when the session opens (back-channel logout may name it).
    var providerSessionID: String?
    /// The session this sign-in steps up: it ends when the new one opens.
    var replaces: String?

    init(app: AppRequest, subject: String, acr: String?, sealedIdentity: String, providerSessionID: String?, replaces: String? = nil) {
        self.app = app
        self.subject = subject
        self.acr = acr
        self.sealedIdentity = sealedIdentity
        self.providerSessionID = providerSessionID
        self.replaces = replaces
    }

    init?(json: [String: JSONValue]) {
        guard let app = json["app"]?.objectValue.flatMap(AppRequest.init(json:)), let subject = json["subject"]?.stringValue,
            let sealed = json["sealedIdentity"]?.stringValue
        else { return nil }
        self.init(
            app: app, subject: subject, acr: json["acr"]?.stringValue, sealedIdentity: sealed, providerSessionID: json["providerSessionID"]?.stringValue,
            replaces: json["replaces"]?.stringValue
        )
    }

    var json: JSONValue {
        var object: [String: JSONValue] = ["app": .object(app.json), "subject": .string(subject), "sealedIdentity": .string(sealedIdentity)]
        object["acr"] = acr.map { .string($0) }
        object["providerSessionID"] = providerSessionID.map { .string($0) }
        object["replaces"] = replaces.map { .string($0) }
        return .object(object)
    }
}

/// A signed-in person, for one app: what the refresh token, the access token's `sid`, /userinfo,
/// introspection and forward-auth refer to.
struct SessionRecord: Sendable, Equatable {
    var clientID: String
    var subject: String
    var providerID: String
    var scopes: [String]
    var acr: String?
    var span: Span
    var sealedIdentity: String
    var origin = Origin()

    /// Where the session was opened from.
    struct Origin: Sendable, Equatable {
        /// How the app instance that opened the session was attested, and its instance key:
        /// refreshes must come from it.
        var attested: ClientAttested?
        /// The app's label for the device (`device_name` at /authorize), for the person's session list.
        var device: String?
        /// The thumbprint of the DPoP key the session's refresh tokens are bound to (RFC 9449 §5):
        /// a refresh needs a proof by it.
        var dpopKey: String?
        /// The session of the app that approved this device's request (RFC 8628 through
        /// `/device/approve`): this session never outlives it, and ends with it.
        var approvedBy: String?
    }

    /// When the session began, its absolute end (idle renewals never go past it), and its refreshes.
    struct Span: Sendable, Equatable {
        var createdAt: Double
        var expiresAt: Double
        /// The generation of the live refresh token (``SessionTokens``): 0 at sign-in, one more per rotation.
        var generation = 0
        /// When the last rotation happened; nil before the first.
        var refreshedAt: Double?
    }

    init(clientID: String, subject: String, providerID: String, scopes: [String], acr: String?, createdAt: Double, expiresAt: Double, sealedIdentity: String) {
        self.clientID = clientID
        self.subject = subject
        self.providerID = providerID
        self.scopes = scopes
        self.acr = acr
        self.span = Span(createdAt: createdAt, expiresAt: expiresAt)
        self.sealedIdentity = sealedIdentity
    }

}

extension SessionRecord {
    /// The record's first byte in the store (an earlier version's JSON starts with `{`).
    static let compactFormat: UInt8 = 0xC1

    /// The stored form (``CompactWriter``): about 40% smaller than the JSON it replaced.
    var stored: [UInt8] {
        var writer = CompactWriter(format: Self.compactFormat, capacity: 160 + sealedIdentity.utf8.count * 3 / 4)
        let flags: UInt8 =
            (acr == nil ? 0 : 1) | (origin.attested == nil ? 0 : 2) | (origin.device == nil ? 0 : 4) | (span.refreshedAt == nil ? 0 : 8)
            | (origin.dpopKey == nil ? 0 : 16) | (origin.approvedBy == nil ? 0 : 32)
        writer.byte(flags)
        writer.string(clientID)
        writer.string(subject)
        writer.string(providerID)
        writer.length(scopes.count)
        for scope in scopes { writer.string(scope) }
        writer.double(span.createdAt)
        writer.double(span.expiresAt)
        writer.sealed(sealedIdentity)
        if let acr { writer.string(acr) }
        if let attested = origin.attested {
            writer.string(attested.platform)
            writer.string(attested.thumbprint)
        }
        if let device = origin.device { writer.string(device) }
        if let refreshedAt = span.refreshedAt {
            writer.length(span.generation)
            writer.double(refreshedAt)
        }
        if let dpopKey = origin.dpopKey { writer.string(dpopKey) }
        if let approvedBy = origin.approvedBy { writer.string(approvedBy) }
        return writer.bytes
    }

    /// When a stored record was made and when it ends, read without the rest (its sealed identity
    /// above all): what a person's sessions are ordered by when they are over the limit.
    static func lifetime(stored bytes: [UInt8]?) -> (createdAt: Double, expiresAt: Double)? {
        guard let bytes else { return nil }
        guard var reader = CompactReader(bytes, format: Self.compactFormat) else {
            return Self(earlierVersionJSON: bytes).map { ($0.span.createdAt, $0.span.expiresAt) }
        }
        // The flags, the client, the subject and the provider, then the scopes.
        guard let flags = reader.byte(), flags & ~63 == 0, reader.raw() != nil, reader.raw() != nil, reader.raw() != nil,
            let count = reader.length()
        else { return nil }
        for _ in 0..<count where reader.raw() == nil { return nil }
        guard let createdAt = reader.double(), let expiresAt = reader.double() else { return nil }
        return (createdAt, expiresAt)
    }

    /// A stored record in either form; nil for anything else or anything cut short.
    init?(stored bytes: [UInt8]?) {
        guard let bytes else { return nil }
        guard var reader = CompactReader(bytes, format: Self.compactFormat) else {
            guard let record = Self(earlierVersionJSON: bytes) else { return nil }
            self = record
            return
        }
        guard let flags = reader.byte(), flags & ~63 == 0, let clientID = reader.string(), let subject = reader.string(),
            let providerID = reader.string(), let count = reader.length()
        else { return nil }
        var scopes: [String] = []
        for _ in 0..<count {
            guard let scope = reader.string() else { return nil }
            scopes.append(scope)
        }
        guard let createdAt = reader.double(), let expiresAt = reader.double(), let sealed = reader.sealed() else { return nil }
        var acr: String?
        if flags & 1 != 0 {
            guard let value = reader.string() else { return nil }
            acr = value
        }
        self.init(
            clientID: clientID, subject: subject, providerID: providerID, scopes: scopes, acr: acr, createdAt: createdAt, expiresAt: expiresAt,
            sealedIdentity: sealed
        )
        if flags & 2 != 0 {
            guard let platform = reader.string(), let thumbprint = reader.string() else { return nil }
            origin.attested = ClientAttested(platform: platform, thumbprint: thumbprint)
        }
        if flags & 4 != 0 {
            guard let device = reader.string() else { return nil }
            origin.device = device
        }
        if flags & 8 != 0 {
            guard let generation = reader.length(), let refreshedAt = reader.double() else { return nil }
            span.generation = generation
            span.refreshedAt = refreshedAt
        }
        if flags & 16 != 0 {
            guard let dpopKey = reader.string() else { return nil }
            origin.dpopKey = dpopKey
        }
        if flags & 32 != 0 {
            guard let approvedBy = reader.string() else { return nil }
            origin.approvedBy = approvedBy
        }
        guard reader.isAtEnd else { return nil }
    }
}

/// A record written with Relais' own JSON code rather than Codable: these are read on every
/// userinfo and refresh, where JSONDecoder cost more than the store round trip.
protocol JSONRecord {
    init?(json: [String: JSONValue])
    var json: JSONValue { get }
}

extension StoredJSON {
    static func encode<Value: JSONRecord>(_ value: Value) -> [UInt8] { value.json.serialized() }

    static func decode<Value: JSONRecord>(_ type: Value.Type, _ bytes: [UInt8]?) -> Value? {
        bytes.flatMap(JSONValue.object(from:)).flatMap(Value.init(json:))
    }
}

/// Between `GET /logout` and the provider's return to `/logout/callback`.
struct LogoutTransaction: Codable, Sendable {
    /// nil when the logout named no `post_logout_redirect_uri`: a page ends it.
    var redirectURI: String?
    var state: String?
}
