import Foundation

/// The app's Relais session: sign-in, DPoP, attestation, single-flight refresh, and the calls an
/// app makes with its tokens, all through one actor per session.
///
/// ```swift
/// let client = RelaisClient(configuration: .init(issuer: "https://relais.example.fr", clientID: "fr.example.app"),
///                           platform: .apple(callbackScheme: "fr.example.app"))
/// try await client.signIn()
/// let response = try await client.authorizedRequest(HTTPRequest(url: URL(string: "https://api.example.fr/orders")!))
/// ```
public actor RelaisClient {
    /// What the client was made with.
    public nonisolated let configuration: RelaisConfiguration
    nonisolated let platform: RelaisPlatform
    nonisolated let keys: StorageKeys
    private nonisolated let broadcaster: StateBroadcaster

    /// The current state; every change is also published on ``states()``.
    public private(set) var state: ClientState = .signedOut
    /// The session's tokens, once read from the storage.
    var record: TokenRecord?
    var loaded = false
    var metadata: RelayEndpoints?
    var instanceKey: (any ProofKey)?
    var refreshTask: Task<TokenRecord, any Error>?
    /// Nonces Relais issued, by origin (scheme://host:port), for the next DPoP proof there.
    var nonces: [String: String] = [:]
    var attestation: StoredAttestation?
    /// Tokens received while the storage was locked: written at the next call.
    var unsaved = false
    /// How far Relais' clock is ahead of this device's, learnt when Relais refused a proof's `iat`
    /// (it takes one from 60 s back to 5 s ahead of its own time; a clock set by hand is often
    /// further off): what every later proof's `iat` adds.
    var relayClockOffset: TimeInterval = 0

    public init(configuration: RelaisConfiguration, platform: RelaisPlatform) {
        self.configuration = configuration
        self.platform = platform
        keys = StorageKeys(prefix: configuration.clientID)
        broadcaster = StateBroadcaster(.signedOut)
    }

    /// The states from now on, starting with the current one. Each call gives its own sequence.
    public nonisolated func states() -> AsyncStream<ClientState> { broadcaster.subscribe() }

    func apply(_ event: ClientEvent) {
        let next = state.next(event)
        guard next != state else { return }
        state = next
        broadcaster.publish(next)
    }

    var now: Date { platform.clock.now }

    /// The device's time moved onto Relais' clock: the `iat` of DPoP and attestation proofs.
    var relayNow: Date { now.addingTimeInterval(relayClockOffset) }

    /// For a refusal of a proof's `iat` by Relais itself (`dpop_iat`, `jwt_iat`): learns Relais'
    /// clock from the answer's `Date` header, and says whether the proof is worth making again.
    func correctedClock(after failure: RelayFailure, _ response: HTTPResponse, from url: URL) -> Bool {
        guard
            (failure.error == "invalid_dpop_proof" && failure.description.contains("dpop_iat"))
                || (failure.error == "invalid_client_attestation" && failure.description.contains("jwt_iat")),
            let issuer = URL(string: configuration.issuer), Self.origin(url) == Self.origin(issuer),  // an API's Date is not Relais' clock
            let date = response.header("Date").flatMap(RelayClock.parse)
        else { return false }
        let offset = date.timeIntervalSince(now)
        guard abs(offset - relayClockOffset) > RelayClock.tolerance else { return false }
        relayClockOffset = offset
        return true
    }

    // MARK: Storage

    /// Reads the stored session (once, or again while the storage was locked). Locked storage is
    /// the ``ClientState/storageLocked`` state and an error; nothing is deleted because of it.
    /// Tokens received while the storage could not be written are written first: the stored ones
    /// are older, and their refresh token already rotated out (sending it would end the session).
    @discardableResult
    public func restore() async throws -> ClientState {
        do {
            if unsaved, let record {
                try save(record)
                unsaved = false
            } else {
                record = try platform.storage.decode(TokenRecord.self, keys.session)
            }
            attestation = try platform.storage.decode(StoredAttestation.self, keys.attestation)
        } catch let error as RelaisKitError where error.code == .storageLocked {
            apply(.storageLocked)
            throw error
        }
        loaded = true
        if let record, let bound = record.dpopThumbprint {
            // The key the tokens are bound to must still be this instance's. Only a key that is
            // gone or another ends the session: one that cannot be read now (a locked device) is
            // the storage's state, never a reason to delete anything.
            let key: (any ProofKey)?
            do {
                key = try loadInstanceKey(create: false)
            } catch let error as RelaisKitError where error.code == .keyLost {
                key = nil
            } catch let error as RelaisKitError where error.code == .storageLocked {
                apply(.storageLocked)
                throw error
            }
            if key?.thumbprint != bound {
                try await endLocally(RelaisKitError(.keyLost, "the tokens are bound to a key this instance no longer has; sign in again"), revoke: record)
                return state
            }
        }
        apply(.restored(record?.summary))
        return state
    }

    func ensureLoaded() async throws {
        if unsaved, let record {
            // Tokens that arrived while the storage was locked: they are the live ones, written
            // before the storage is read again.
            if (try? save(record)) != nil { unsaved = false }
            return
        }
        if !loaded || state == .storageLocked { try await restore() }
    }

    /// Writes the tokens; a locked storage keeps them in memory and says so in the state.
    func save(_ record: TokenRecord) throws {
        self.record = record
        try platform.storage.encode(record, keys.session)
    }

    /// Ends the session on this device: forgets the tokens (and, best effort, revokes them at Relais).
    func endLocally(_ error: RelaisKitError, revoke: TokenRecord? = nil) async throws {
        if let token = revoke?.refreshToken, let endpoints = try? await endpoints() {
            _ = try? await platform.transport.send(.form(endpoints.revocation, [("token", token), ("token_type_hint", "refresh_token"), ("client_id", configuration.clientID)]))
        }
        record = nil
        refreshTask = nil
        try? platform.storage.delete(keys.session)
        apply(.failed(error))
    }

    // MARK: Instance key

    /// The instance key: made once per installation, kept in the storage.
    func loadInstanceKey(create: Bool = true) throws -> any ProofKey {
        if let instanceKey { return instanceKey }
        if let stored = try platform.storage.decode(StoredKey.self, keys.instanceKey) {
            let key = try platform.keys.loadKey(kind: stored.kind, stored.representation)
            instanceKey = key
            return key
        }
        guard create else { throw RelaisKitError(.keyLost, "no instance key is stored") }
        let key = try platform.keys.makeKey()
        try platform.storage.encode(StoredKey(kind: key.kind, representation: key.persistentRepresentation), keys.instanceKey)
        instanceKey = key
        return key
    }

    /// The instance key's kind (Secure Enclave or software) and thumbprint, when it exists.
    public func instanceKeyDescription() -> (kind: ProofKeyKind, thumbprint: String)? {
        guard let key = try? loadInstanceKey(create: false) else { return nil }
        return (key.kind, key.thumbprint)
    }

    // MARK: Relais

    func endpoints() async throws -> RelayEndpoints {
        if let metadata { return metadata }
        let url = URL(string: configuration.issuer + "/.well-known/oauth-authorization-server")!
        let response = try await platform.transport.send(HTTPRequest(url: url))
        guard response.status == 200, let document = JSONReading.object(response.body) else {
            throw RelaisKitError(.invalidResponse, "the metadata answered \(response.status)", status: response.status)
        }
        let endpoints = try RelayEndpoints(issuer: configuration.issuer, metadata: document)
        metadata = endpoints
        return endpoints
    }

    static func origin(_ url: URL) -> String {
        "\(url.scheme ?? "https")://\(url.host ?? "")" + (url.port.map { ":\($0)" } ?? "")
    }

    /// A DPoP proof (RFC 9449 §4.2) for this method and URL, with `ath` for a resource call and
    /// the origin's latest nonce.
    func proof(method: String, url: URL, accessToken: String?, key: any ProofKey) throws -> String {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        components?.query = nil
        components?.fragment = nil
        var claims: [(String, JSONScalar)] = [
            ("jti", .string(CompactJWT.random(bits: 128))), ("htm", .string(method)), ("htu", .string(components?.string ?? url.absoluteString)),
            ("iat", .integer(Int(relayNow.timeIntervalSince1970))),
        ]
        if let accessToken { claims.append(("ath", .string(CompactJWT.sha256(accessToken)))) }
        if let nonce = nonces[Self.origin(url)] { claims.append(("nonce", .string(nonce))) }
        return try CompactJWT.sign(header: [("typ", .string("dpop+jwt")), ("alg", .string("ES256")), ("jwk", .raw(key.publicJWK))], claims: claims, key: key)
    }

    func remember(_ response: HTTPResponse, from url: URL) {
        if let nonce = response.header("DPoP-Nonce"), !nonce.isEmpty { nonces[Self.origin(url)] = nonce }
    }

    /// A `/token` request with its DPoP proof and client attestation; retried once with Relais'
    /// nonce (`use_dpop_nonce`) and once with a fresh attestation (`use_fresh_attestation`).
    func tokenRequest(_ fields: [(String, String)]) async throws -> [String: KitJSON] {
        let endpoints = try await endpoints()
        var retriedNonce = false
        var retriedAttestation = false
        var retriedClock = false
        while true {
            var headers: [(name: String, value: String)] = []
            if configuration.dpop || configuration.attestation != nil {
                let key = try loadInstanceKey()
                if configuration.dpop { headers.append((name: "DPoP", value: try proof(method: "POST", url: endpoints.token, accessToken: nil, key: key))) }
                if configuration.attestation != nil { headers += try await attestationHeaders(key: key) }
            }
            let response = try await platform.transport.send(.form(endpoints.token, fields, headers: headers))
            remember(response, from: endpoints.token)
            if response.status == 200, let answer = JSONReading.object(response.body) { return answer }
            guard let failure = RelayFailure(response) else { throw RelaisKitError(.invalidResponse, "/token answered \(response.status)", status: response.status) }
            if failure.error == "use_dpop_nonce", !retriedNonce, response.header("DPoP-Nonce") != nil {
                retriedNonce = true
                continue
            }
            if !retriedClock, correctedClock(after: failure, response, from: endpoints.token) {
                retriedClock = true
                continue
            }
            if failure.error == "use_fresh_attestation", !retriedAttestation {
                retriedAttestation = true
                try forgetAttestation()
                continue
            }
            throw failure.kitError(status: response.status)
        }
    }
}

/// Relais' clock as its `Date` header (RFC 9110 §5.6.7, IMF-fixdate) tells it.
enum RelayClock {
    /// Seconds of difference taken as noise: the header's rounding and the answer's time.
    static let tolerance: TimeInterval = 2

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT`; nil for anything else.
    static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])), let year = Int(parts[3]) else {
            return nil
        }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3 else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: DateComponents(year: year, month: month + 1, day: day, hour: time[0], minute: time[1], second: time[2]))
    }
}

/// Hands every state to each subscriber's AsyncStream.
final class StateBroadcaster: @unchecked Sendable {
    private let lock = NSLock()
    private var current: ClientState
    private var continuations: [UUID: AsyncStream<ClientState>.Continuation] = [:]

    init(_ initial: ClientState) { current = initial }

    func subscribe() -> AsyncStream<ClientState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ClientState.self)
        let id = UUID()
        lock.locked {
            continuations[id] = continuation
            continuation.yield(current)
        }
        continuation.onTermination = { [weak self] _ in self?.lock.locked { _ = self?.continuations.removeValue(forKey: id) } }
        return stream
    }

    func publish(_ state: ClientState) {
        lock.locked {
            current = state
            for continuation in continuations.values { continuation.yield(state) }
        }
    }
}

extension RelaisClient {
    /// Sets the nonce for an origin, as a `DPoP-Nonce` answer from there would.
    func setNonce(_ nonce: String, for url: URL) { nonces[Self.origin(url)] = nonce }
}
