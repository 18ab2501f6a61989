public import Hummingbird
public import RelaisClock
public import RelaisConfig
import RelaisCrypto
public import RelaisHTTPClient
public import RelaisJOSE
import RelaisOIDC
public import RelaisServer
public import RelaisStore

/// The relay: an OAuth 2.0 authorization server for apps (RFC 6749, PKCE, RFC 8252) and a
/// confidential OpenID Connect client of the providers. This is where its services are built
/// from the configuration and each route gets the ones it uses; the flows live in their folders
/// (`SignIn/`, `Tokens/`, `Sessions/`, `Resource/`, `Logout/`, `UserSessions/`, `Discovery/`, `Demo/`).
public struct Relay: Sendable {
    private let routes: [any RelayRoutes]
    /// Apart from `routes` (forward-auth, /userinfo): their answers from memory must not pay the
    /// flows' per-request middleware; each binds its events' origin on its full path itself.
    private let hotRoutes: [any RelayRoutes]
    private let trustedProxies: [IPNetwork]
    /// The operator's look and the default language of Relais' pages (`pages.*`).
    private let pages: PageRenderer
    /// Kept in step with the store by ``RelayKeySync`` when generated.
    let keys: RelayKeys

    /// Builds the services once per process; keys may be read from (or, in development, generated
    /// with `generateKey` and written to) the store. `eventSink` replaces the configured output of
    /// security events (tests).
    public init(
        configuration: RelaisConfiguration, store: any KeyValueStore, httpClient: HTTPClient, clock: any RelaisClock = SystemClock(),
        eventSink: (any SecurityEventSink)? = nil, generateKey: @escaping KeyGenerator = JWK.freshKey
    ) async throws {
        try await self.init(
            configuration: configuration, store: store, httpClient: httpClient, clock: clock, eventSink: eventSink, extensions: .init(), generateKey: generateKey)
    }

    /// `extensions`: grants and attestation formats a test adds to the built-in ones.
    init(
        configuration: RelaisConfiguration, store: any KeyValueStore, httpClient: HTTPClient, clock: any RelaisClock, eventSink: (any SecurityEventSink)?,
        extensions: RelayExtensions, generateKey: @escaping KeyGenerator = JWK.freshKey
    ) async throws {
        let issuer = configuration.server.publicBaseURL
        let sessions = RelayStore(
            store: store, settings: configuration.relay, clock: clock, liveness: SessionLiveness(store: store, maxBytes: configuration.memory.sessionLiveness))
        let keys = try await RelayKeys.load(configuration.keys, store: sessions, generateKey: generateKey)
        let vault = SessionVault(keys: keys, cacheBytes: configuration.memory.identities)
        let apps = Dictionary(configuration.apps.map { ($0.clientID, $0) }, uniquingKeysWith: { first, _ in first })
        let providerSettings = Dictionary(configuration.providers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let providers = providerSettings.mapValues { UpstreamProvider(settings: $0, http: httpClient, clock: clock) }
        let trustedProxies = configuration.server.trustedProxies.compactMap(IPNetwork.init)
        let events = try await Self.securityEvents(configuration.securityEvents, sink: eventSink, sessions: sessions, clock: clock)
        let limiter = RateLimiter(sessions: sessions, settings: configuration.rateLimit, trustedProxies: trustedProxies, events: events)
        let dpop = DPoPGuard(sessions: sessions, nonces: DPoPNonces(keys: keys, clock: clock), events: events)
        let bearer = BearerAuthenticator(issuer: issuer, keys: keys, sessions: sessions, dpop: dpop, cacheBytes: configuration.memory.verifiedTokens)
        let cookies = BrowserCookies(issuer: issuer)
        let webSessions = WebSessionAuthenticator(sessions: sessions, cookies: cookies)
        let starter = SignInStarter(providers: providers, sessions: sessions, issuer: issuer, cookies: cookies)
        let development = configuration.server.environment == .development
        let tokenIssuer = TokenIssuer(minter: TokenMinter(issuer: issuer, keys: keys, clock: clock))
        let tokenSessions = TokenSessions(sessions: sessions, vault: vault, keys: keys, issuer: issuer)
        let attestation = ClientAttestationGuard(issuer: issuer, keys: keys, sessions: sessions, events: events)
        let grants = TokenGrants(
            [
                AuthorizationCodeGrant(sessions: sessions, vault: vault, tokens: tokenIssuer, events: events),
                RefreshGrant(sessions: sessions, vault: vault, tokens: tokenIssuer, grace: configuration.relay.refreshGrace, events: events),
                DeviceCodeGrant(sessions: sessions, vault: vault, tokens: tokenIssuer, events: events),
            ] + extensions.grants)
        let challenges = AttestationChallenges(sessions: sessions)
        var attesters: [any PlatformAttester] = [
            AppAttestAttester(step: .attestation, challenges: challenges),
            AppAttestAttester(step: .assertion, challenges: challenges),
            try PlayIntegrityAttester(apps: apps, challenges: challenges, http: httpClient),
        ]
        if configuration.relay.devAttester { attesters.append(DevelopmentAttester(challenges: challenges)) }

        var routes: [any RelayRoutes] = [
            AuthorizeRoute(
                validator: AppAuthorizationValidator(apps: apps, providers: providerSettings), starter: starter, tokens: tokenSessions, limiter: limiter, issuer: issuer
            ),
            CallbackRoute(providers: providers, sessions: sessions, vault: vault, limiter: limiter, events: events, issuer: issuer, cookies: cookies),
            TokenRoute(apps: apps, limiter: limiter, grants: grants, dpop: dpop, attestation: attestation, issuer: issuer),
            AttestationRoutes(
                apps: apps, attesters: attesters + extensions.attesters, limiter: limiter, sessions: sessions,
                attestations: ClientAttestationIssuer(issuer: issuer, keys: keys, clock: clock), events: events
            ),
            IntrospectRoute(bearer: bearer, sessions: sessions, resourceServers: configuration.resourceServers),
            UserSessionRoutes(bearer: bearer, sessions: sessions, events: events),
            AdminSessionRoutes(token: configuration.adminToken, providers: configuration.providers.map(\.id), sessions: sessions, limiter: limiter, events: events),
            SessionCodeRoutes(
                issuer: issuer, apps: apps, bearer: bearer, webSessions: webSessions, sessions: sessions, vault: vault, limiter: limiter,
                developmentTarget: development ? issuer + DemoAppRoutes.webPath : nil
            ),
            DeviceRoutes(issuer: issuer, apps: apps, bearer: bearer, sessions: sessions, limiter: limiter, events: events),
            DevicePageRoutes(issuer: issuer, apps: apps, sessions: sessions, limiter: limiter, starter: starter),
            RevokeRoute(apps: apps, tokens: tokenSessions, dpop: dpop, issuer: issuer, events: events),
            LogoutRoutes(apps: apps, providers: providers, vault: vault, tokens: tokenSessions, bearer: bearer, events: events),
            BackchannelLogoutRoute(providers: providers, sessions: sessions, events: events),
            WellKnownRoutes(files: configuration.wellKnown),
            MetadataRoutes(issuer: issuer, apps: configuration.apps, providers: configuration.providers, keys: keys, grantTypes: grants.offered(to: configuration.apps)),
        ]
        if development {
            routes.append(
                DemoAppRoutes(
                    issuer: issuer, apps: configuration.apps, providers: configuration.providers, devAttester: configuration.relay.devAttester, webSessions: webSessions,
                    vault: vault))
            routes.append(DemoDesktopRoutes(apps: configuration.apps))
        }
        self.routes = routes
        hotRoutes = [
            ForwardAuthRoute(
                bearer: bearer, webSessions: webSessions, apps: apps, settings: configuration.forwardAuth, acrOrders: providerSettings.mapValues(\.acrOrder),
                trustedProxies: trustedProxies
            ),
            UserinfoRoute(
                bearer: bearer, sessions: sessions, vault: vault, acrOrders: providerSettings.mapValues(\.acrOrder),
                bodies: MemoryCache(maxBytes: configuration.memory.userinfoBodies), trustedProxies: trustedProxies
            ),
        ]
        self.trustedProxies = trustedProxies
        self.keys = keys
        pages = PageRenderer(configuration.pages)
    }

    public func register(on router: Router<RelaisRequestContext>) {
        // Forward-auth and /userinfo bind their events' origin themselves, on their full path only:
        // the answers from memory record no event, and each middleware layer is a measurable share
        // of them (about seven executor switches per request).
        for route in hotRoutes { route.register(on: router) }
        let flows = router.group()
            .add(middleware: EventOriginMiddleware(trustedProxies: trustedProxies))
            .add(middleware: PageContextMiddleware(renderer: pages))
        for group in routes { group.register(on: flows) }
    }

    /// The security event log: off, or to its output with a hash key that every instance shares
    /// (configured, or written once to the store by the first instance).
    private static func securityEvents(
        _ settings: RelaisConfiguration.SecurityEvents, sink: (any SecurityEventSink)?, sessions: RelayStore, clock: any RelaisClock
    ) async throws -> SecurityEventLog {
        guard settings.enabled else { return SecurityEventLog(sink: nil, hashKey: [], clock: clock) }
        let output = try sink ?? DescriptorEventSink(settings.output)
        if let key = settings.hashKey { return SecurityEventLog(sink: output, hashKey: key, clock: clock) }
        guard let shared = try await sessions.sharedValue(.eventHashKey, proposing: SecureRandom.bytes(32)), shared.count >= 32 else {
            throw RelayStartupError("the security events' hash key could not be kept in the store")
        }
        return SecurityEventLog(sink: output, hashKey: shared, clock: clock)
    }
}

/// What a test adds to the relay's built-in grants and attestation formats (docs/extending.md).
struct RelayExtensions: Sendable {
    var grants: [any TokenGrant] = []
    var attesters: [any PlatformAttester] = []
}

/// A route or a group of routes of one flow.
protocol RelayRoutes: Sendable {
    func register(on router: some RouterMethods<RelaisRequestContext>)
}
