public import RelaisAttest
public import RelaisJOSE

/// An OpenID provider Relais signs users in with (`providers.<id>`).
public struct ProviderSettings: Sendable {
    /// How a level (`acr`) is asked of the provider.
    public enum ACRRequest: String, Sendable, CaseIterable {
        /// `acr_values`: FranceConnect's way; OpenID Connect makes it a voluntary hint.
        case acrValues = "acr_values"
        /// `claims={"id_token":{"acr":{"essential":true,"values":[…]}}}` with the requested level and
        /// those above it: ProConnect's way, binding on the provider (OIDC Core §5.5.1.1).
        case claims
    }

    public enum ClientAuthentication: String, Sendable, CaseIterable {
        case clientSecretPost = "client_secret_post"
        case clientSecretBasic = "client_secret_basic"
        case privateKeyJWT = "private_key_jwt"
    }

    /// How the userinfo endpoint answers.
    public enum UserinfoFormat: String, Sendable, CaseIterable {
        case json, jws, jwe
        /// By Content-Type: `application/jwt` is a JWS or a JWE, anything else JSON.
        case auto
    }

    public var id: String
    /// Where the settings below started; explicit keys override them.
    public var preset: ProviderDefaults
    public var issuer: String
    /// Read endpoints from `{issuer}/.well-known/openid-configuration`; explicit endpoints win.
    public var discovery: Bool
    public var authorizationEndpoint: String?
    public var tokenEndpoint: String?
    public var userinfoEndpoint: String?
    public var jwksURI: String?
    public var endSessionEndpoint: String?
    public var clientID: String
    public var clientSecret: String?
    public var clientAuthentication: ClientAuthentication
    /// The private key for `private_key_jwt` assertions.
    public var clientKey: JWK?
    public var scopes: [String]
    /// Sent as `acr_values` unless the app asks for a level in `acrOrder`.
    public var acrValues: String?
    /// Levels from lowest to highest; the id_token's `acr` must reach the requested one.
    public var acrOrder: [String]
    /// The levels the provider gives (its `acr_values_supported`): FranceConnect eidas1,
    /// FranceConnect+ eidas2 and eidas3. An app asking for none of them is stepped up or refused.
    public var acrValuesSupported: [String]
    public var acrRequest: ACRRequest
    /// Pass an app's `idp_hint` (which identity provider to go to) on to the provider. FranceConnect
    /// and ProConnect take it; an app sending one to a provider that does not is refused.
    public var forwardsIDPHint: Bool
    /// The provider to use when an app asks for a level this one cannot give (RFC 9470 step-up):
    /// FranceConnect names FranceConnect+.
    public var stepUpProvider: String?
    /// Algorithms accepted for the id_token.
    public var idTokenAlgorithms: [JWSAlgorithm]
    /// How the access token reaches the userinfo endpoint: the `Authorization` header, or a POSTed
    /// form field for providers that only take that (RFC 6750 §2.2).
    public var userinfoTokenIn = UserinfoTokenPlacement.header

    public enum UserinfoTokenPlacement: String, Sendable, CaseIterable {
        case header, body
    }

    /// Algorithms accepted for a signed userinfo; nil: the id_token's.
    public var userinfoAlgorithms: [JWSAlgorithm]?
    /// Refuse an id_token that is only signed, not encrypted (FranceConnect+ always encrypts: a
    /// plain token injected in its place must not be a downgrade).
    public var requireEncryptedIDToken: Bool
    public var userinfoFormat: UserinfoFormat
    /// Our private keys for JWE responses (FranceConnect+), chosen by `kid`.
    public var decryptionKeys: [JWK]
    /// Development only: the decryption key was generated at load (no `decryption_key_files`);
    /// a reload keeps the running one, or sign-ins in flight could not be decrypted.
    public var decryptionKeysGenerated = false
    /// Send PKCE (S256) to the provider. FranceConnect refuses unknown parameters, so its presets say no.
    public var pkce: Bool
    /// Whether callbacks must carry `iss` (RFC 9207); when they do, it is always checked.
    public var requireCallbackIssuer: CallbackIssuer

    /// `auto`: required when the provider's discovery says `authorization_response_iss_parameter_supported: true`.
    public enum CallbackIssuer: String, Sendable, CaseIterable {
        case auto, always, never
    }
    /// Accept OpenID Connect Back-Channel Logout tokens from this provider at
    /// `POST /backchannel-logout` (register that URL with the provider). FranceConnect sends none.
    public var backchannelLogout: Bool = false
    /// Where the provider sends the browser back after its logout. Default: {public_base_url}/logout/callback.
    public var postLogoutRedirectURI: String?
    /// Total time for each call to this provider (token, userinfo, JWKS, discovery).
    public var timeout: Duration?
    /// A token naming an unknown `kid` refetches the provider's JWKS (a key rotation), at most once
    /// per this interval, so forged `kid`s cannot make Relais hammer the provider.
    public var jwksRefetchInterval: Duration = .seconds(10)

    public init(id: String, preset: ProviderDefaults, issuer: String, clientID: String) {
        self.id = id
        self.preset = preset
        self.issuer = issuer
        self.clientID = clientID
        discovery = preset.discovery
        clientAuthentication = preset.clientAuthentication
        scopes = preset.scopes
        acrValues = preset.acrValues
        acrOrder = preset.acrOrder
        acrValuesSupported = preset.acrValuesSupported ?? preset.acrOrder
        acrRequest = preset.acrRequest
        forwardsIDPHint = preset.forwardsIDPHint
        idTokenAlgorithms = preset.idTokenAlgorithms
        userinfoFormat = preset.userinfoFormat
        decryptionKeys = []
        pkce = preset.pkce
        requireCallbackIssuer = preset.requireCallbackIssuer
        requireEncryptedIDToken = preset.requireEncryptedIDToken
    }
}

/// A mobile app allowed to sign in through Relais (`apps.<client_id>`): an OAuth public client.
public struct AppSettings: Sendable {
    public var clientID: String
    /// The name people know the app by (`apps.<client_id>.name`), shown where they decide about it
    /// (a device request's approval); nil shows the client_id.
    public var name: String?
    /// Exact redirect URIs. A loopback `http://127.0.0.1/...` or `http://[::1]/...` entry matches any
    /// port (RFC 8252 §7.3).
    public var redirectURIs: [String]
    public var postLogoutRedirectURIs: [String]
    /// Providers the app may use; the first is the default.
    public var providers: [String]
    /// Scopes the app may ask for; a request without `scope` gets all of them.
    public var scopes: [String]
    /// `aud` of the app's access tokens: the APIs it calls. Default: the client_id.
    public var audiences: [String]
    public var accessTokenLifetime: Duration = .seconds(300)
    /// How the app's id_tokens are signed (`id_token_signed_response_alg`, OpenID Connect Dynamic
    /// Client Registration 1.0 §2: RS256 unless the app asks otherwise).
    public var idTokenAlgorithm = IDTokenAlgorithm.rs256
    /// DPoP (RFC 9449): tokens bound to a key held by the app instance.
    public var dpop = DPoPPolicy.allowed
    /// Proofs at `/token` must carry a nonce Relais issued (`DPoP-Nonce`, RFC 9449 §8).
    public var dpopNonce = false
    /// Web pages (behind the gateway) the app may open signed in through a session code
    /// (`POST /session_code`, `GET /session`); the first is the default target.
    public var webTargets: [String] = []
    /// Sign-in on another device (RFC 8628): nil when the app may not use the device grant.
    public var deviceGrant: DeviceGrant?

    /// Who may approve the app's device requests, besides a person signing in at `/device`.
    public struct DeviceGrant: Sendable, Equatable {
        /// Apps whose signed-in tokens may approve a request (`POST /device/approve`).
        public var approvers: [String] = []
        /// The approving token must come from an attested app instance.
        public var attestedApprovers = false
        /// What the approving token must prove (`device_approvers_proof`): by default a DPoP proof
        /// by the key it is bound to, so that a leaked access token alone cannot open a session.
        public var approverProof = ApproverProof.dpop
        /// How recent the approving session's sign-in must be (`device_approval_max_age`); older,
        /// the app is asked to sign the person in again (`insufficient_user_authentication`).
        public var approvalMaxAge: Duration = .seconds(900)
        public init() {}

        public enum ApproverProof: String, Sendable, CaseIterable {
            /// A DPoP-bound access token, presented with a proof by its key.
            case dpop
            /// Any access token of an approver app, bearer tokens included.
            case bearer
        }
    }

    /// Attestation-based client authentication (draft-ietf-oauth-attestation-based-client-auth):
    /// the app proves at `/token` that it is the genuine app on a genuine device.
    public var attestation = AttestationPolicy.off
    /// How long a Client Attestation JWT that Relais issues stays valid.
    public var clientAttestationLifetime: Duration = .seconds(3600)
    /// Apple App Attest: the app id and environment its attestations must name.
    public var apple: AppleAttestation?
    /// Google Play Integrity: the package, signing certificates and keys from the Play Console.
    public var android: AndroidAttestation?
    /// An attester of the app team's own (its Client Attestation JWTs are accepted at `/token`):
    /// its `iss` and public keys.
    public var attester: ExternalAttester?

    /// `off`: attestation headers are ignored. `allowed`: an app that sends them must send valid
    /// ones, and its sessions are marked attested. `required`: `/token` refuses an app without.
    public enum AttestationPolicy: String, Sendable, CaseIterable {
        case off, allowed, required
    }

    public struct AppleAttestation: Sendable {
        public var verifier: AppAttestVerifier
        public init(verifier: AppAttestVerifier) { self.verifier = verifier }
    }

    public struct AndroidAttestation: Sendable {
        public var policy: PlayIntegrityPolicy
        /// Classic requests, decoded locally: both base64 keys from the Play Console.
        public var decryptionKey: String?
        public var verificationKey: String?
        /// Standard requests, decoded by Google: the service account's JSON key.
        public var serviceAccount: [UInt8]?
        public var decodeServiceURL = "https://playintegrity.googleapis.com"
        public init(policy: PlayIntegrityPolicy) { self.policy = policy }
    }

    public struct ExternalAttester: Sendable {
        public var issuer: String
        public var keys: JWKSet
        public init(issuer: String, keys: JWKSet) {
            self.issuer = issuer
            self.keys = keys
        }
    }

    /// `off`: a `DPoP` header is ignored and tokens are bearer tokens. `allowed`: an app that sends
    /// a proof gets bound tokens, one that does not gets bearer tokens. `required`: `/token` refuses
    /// a request without a proof.
    public enum IDTokenAlgorithm: String, Sendable, CaseIterable {
        case rs256 = "RS256", es256 = "ES256"
    }

    public enum DPoPPolicy: String, Sendable, CaseIterable {
        case off, allowed, required
    }

    public init(clientID: String, redirectURIs: [String], providers: [String], scopes: [String]) {
        self.clientID = clientID
        self.redirectURIs = redirectURIs
        self.providers = providers
        self.scopes = scopes
        audiences = [clientID]
        postLogoutRedirectURIs = []
    }
}

/// An API that introspects Relais tokens (`resource_servers.<id>`).
public struct ResourceServerSettings: Sendable {
    public var id: String
    public var secret: String
    /// Audiences this API accepts; introspection reports tokens for other audiences inactive.
    /// Empty: any token Relais issued.
    public var audiences: [String]

    public init(id: String, secret: String, audiences: [String]) {
        self.id = id
        self.secret = secret
        self.audiences = audiences
    }
}

/// Relais' own keys: the ones that sign its tokens, and the ones that encrypt sessions at rest.
public struct RelayKeySettings: Sendable {
    /// Signing keys by `kid`; all are published at /jwks.json, `activeSigningKey` signs access
    /// tokens (and the id_tokens of apps that ask for its algorithm).
    public var signingKeys: [JWK] = []
    public var activeSigningKey: String?
    /// The RSA key of `signingKeys` that signs RS256 id_tokens (`signing.active_rsa_key`; OpenID
    /// Connect Discovery 1.0 §3 requires RS256). Nil in development: one is generated.
    public var activeRSAKey: String?
    /// AES-256 keys by id for session payloads; `activeSessionKey` encrypts, all decrypt.
    public var sessionKeys: [(id: String, key: [UInt8])] = []
    public var activeSessionKey: String?
    public init() {}
}

/// What `GET /auth` (forward-auth for gateways) checks and which headers carry the identity.
public struct ForwardAuthSettings: Sendable, Equatable {
    /// Also check the session is live (a revoked session is refused at once), at the cost of a
    /// store read; off, a valid JWT is enough until it expires.
    public var checkSession = true
    public var subjectHeader = "X-Relais-Sub"
    public var clientHeader = "X-Relais-Client"
    public var acrHeader = "X-Relais-Acr"
    public var scopeHeader = "X-Relais-Scope"
    public var sessionHeader = "X-Relais-Session"
    /// How the app instance was attested (`ios`, `android`, `dev`, `external`), empty when it was not.
    public var attestedHeader = "X-Relais-Attested"
    /// The `aud` a token must carry (one of) when the gateway's `/auth` request names none
    /// (`?aud=`); empty: any of Relais' access tokens.
    public var audiences: [String] = []
    public init() {}
}

/// Requests allowed per window on /authorize, /callback and /token (`rate_limit.*`).
public struct RateLimitSettings: Sendable, Equatable {
    public var enabled = true
    public var window: Duration = .seconds(60)
    /// Per client IP (behind `server.trusted_proxies`, from `X-Forwarded-For`).
    public var perIP = 120
    /// Per app (`client_id`), all users together.
    public var perClient = 6000
    /// User-code attempts (at `/device` and `/device/approve`) per client IP, and by everyone
    /// together: a user code is short, so guessing is bounded for the whole service.
    public var userCodesPerIP = 10
    public var userCodes = 1000
    public init() {}
}

/// Byte budgets of the in-process caches (`memory.*`), per instance: what each keeps to spare a
/// store read or a cryptographic operation. Past its budget a cache drops its oldest entries, which
/// are then read or verified again; 0 turns a cache off.
public struct MemorySettings: Sendable, Equatable {
    /// Verified access tokens (about 1.5 KB each): an ES256 verification is skipped while cached.
    public var verifiedTokens = 6 << 20
    /// Opened session identities (about 2 KB each): an AES-GCM open and decode at /userinfo and grants.
    public var identities = 3 << 20
    /// Rendered /userinfo bodies, one per session and scope set.
    public var userinfoBodies = 3 << 20
    /// Sessions known live (about 100 bytes each): the store lookup of a session check.
    public var sessionLiveness = 2 << 20
    public init() {}

    /// The most any one budget may be.
    public static let maxBudget = 1 << 30
}

/// Files served under `/.well-known/` so claimed https redirects open the app (`well_known.*`).
public struct WellKnownSettings: Sendable, Equatable {
    /// iOS universal links: `/.well-known/apple-app-site-association`.
    public var appleAppSiteAssociation: [UInt8]?
    /// Android App Links: `/.well-known/assetlinks.json`.
    public var assetLinks: [UInt8]?
    public init() {}
}

/// `relay.code_format`.
public enum CodeFormat: String, Sendable, CaseIterable {
    case sealed, stored
}

/// Lifetimes and limits of the relay flow (`relay.*`, `sessions.*`).
public struct RelaySettings: Sendable, Equatable {
    /// The sign-in transaction between /authorize and /callback.
    public var transactionLifetime: Duration = .seconds(600)
    /// Relais' authorization code, from /callback to /token.
    public var codeLifetime: Duration = .seconds(60)
    /// What /callback mints: a code carrying its sign-in sealed, or (while instances of a version
    /// before 2026-11-27 still run beside this one) a code whose sign-in is stored, which both read.
    public var codeFormat = CodeFormat.sealed
    /// A rotated refresh token presented again within this window gets the same new pair.
    public var refreshGrace: Duration = .seconds(30)
    /// A session unused for this long ends.
    public var sessionIdleTimeout: Duration = .seconds(30 * 86400)
    /// A session ends this long after sign-in, used or not.
    public var sessionLifetime: Duration = .seconds(90 * 86400)
    /// Live sessions one person may have (per provider); a sign-in beyond it ends their oldest.
    public var maxSessionsPerSubject = 50
    /// The development attester (`POST /attest/dev`): a software key stands in for App Attest and
    /// Play Integrity, so the demo and tests walk the attested path. Refused in production.
    public var devAttester = false
    /// A device authorization request (RFC 8628), from `/device_authorization` to its approval.
    public var deviceCodeLifetime: Duration = .seconds(600)
    /// The least time between two polls of `/token` by one device (`slow_down` otherwise).
    public var devicePollInterval: Duration = .seconds(5)
    public init() {}
}
