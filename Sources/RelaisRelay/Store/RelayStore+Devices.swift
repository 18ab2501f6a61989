import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisStore

/// Device authorization requests (RFC 8628): a device (a desktop, a kiosk) asks, a person or their
/// signed-in app decides, the device polls `/token`. The request is created under the id of the
/// session it will open, so its decision and the session are written under one hash tag.
extension RelayStore {
    /// What a device asked for.
    struct DeviceRequest: Codable, Sendable, Equatable {
        var clientID: String
        var scopes: [String]
        /// A label the device sent (`device_name`), shown to the person who decides as the
        /// device's own words: anyone can write anything there.
        var device: String?
        var expiresAt: Double
        /// When and from which address the device asked (nil in requests stored before these
        /// were kept), shown before the device's own label.
        var requestedAt: Double?
        var requesterAddress: String?
    }

    /// The decision on a request, written once (the first decision wins).
    struct DeviceDecision: Codable, Sendable, Equatable {
        var approved: Bool
        /// Who approved, and the sign-in the device's session will carry.
        var subject: String?
        var providerID: String?
        var acr: String?
        var sealedIdentity: String?
        var providerSessionID: String?
        /// `app` (a signed-in app approved) or `browser` (a sign-in at /device).
        var via: String?
        /// The app session that approved (`via: app`): the device's session is tied to it.
        var approverSID: String?

        static let denied = DeviceDecision(approved: false)
    }

    /// Where a user code's first half leads.
    private struct UserCodeEntry: Codable {
        var sid: String
        var deviceCodeHash: String
        var checkHash: String
    }

    /// What a user code finds. A wrong second half and an unknown first half are one answer, so
    /// that guesses do not learn which first halves are live.
    enum UserCodeLookup: Equatable {
        case unknown
        case found(sid: String, DeviceRequest)
    }

    /// How a request stands when its device polls.
    enum DevicePoll: Equatable {
        /// `unknown`: never issued, or long gone; `expired`: issued, past its lifetime.
        case unknown, expired, foreign, used, tooSoon, pending
        case decided(sid: String, DeviceRequest, DeviceDecision)
    }

    /// Stores a new request; false when a live request already has this user code's first half
    /// (the caller draws another).
    func saveDeviceRequest(_ request: DeviceRequest, deviceCode: String, userCode: UserCode) async throws -> Bool {
        guard let sid = Self.sessionID(in: deviceCode) else { return false }
        let hash = SHA256.hexHash(deviceCode)
        let entry = UserCodeEntry(sid: sid, deviceCodeHash: hash, checkHash: SHA256.hexHash(userCode.check))
        guard try await store.setIfAbsent(Key.userCode(handle: userCode.handle), StoredJSON.encode(entry), ttl: settings.deviceCodeLifetime) else { return false }
        // Kept a lifetime past its expiry, so that its device hears `expired_token` (RFC 8628 §3.5)
        // rather than the `invalid_grant` of a code Relais never issued.
        try await store.set(Key.deviceCode(sid: sid, hash: hash), StoredJSON.encode(request), ttl: settings.deviceCodeLifetime * 2)
        return true
    }

    /// The live request a person's user code names. A wrong guess changes nothing stored: it costs
    /// the guesser (``RateLimiter/checkUserCode(_:_:)``), never the person whose request it aims at.
    func deviceRequest(userCode: UserCode) async throws -> UserCodeLookup {
        guard let entry = StoredJSON.decode(UserCodeEntry.self, try await store.get(Key.userCode(handle: userCode.handle))),
            let request = StoredJSON.decode(DeviceRequest.self, try await store.get(Key.deviceCode(sid: entry.sid, hash: entry.deviceCodeHash))),
            ConstantTime.equals(Array(SHA256.hexHash(userCode.check).utf8), Array(entry.checkHash.utf8))
        else { return .unknown }
        return .found(sid: entry.sid, request)
    }

    /// Records the decision; false when the request was already decided.
    /// Whether the request of device session `sid` was approved or denied already.
    func deviceDecided(_ sid: String) async throws -> Bool {
        try await store.get(Key.deviceDecision(sid)) != nil
    }

    func decideDevice(_ sid: String, _ decision: DeviceDecision) async throws -> Bool {
        try await store.setIfAbsent(Key.deviceDecision(sid), StoredJSON.encode(decision), ttl: settings.deviceCodeLifetime)
    }

    /// A device's poll: at most one per `interval` (the marker lives that long), then the decision.
    func pollDevice(_ deviceCode: String, clientID: String, interval: Duration) async throws -> DevicePoll {
        guard let sid = Self.sessionID(in: deviceCode) else { return .unknown }
        let hash = SHA256.hexHash(deviceCode)
        guard let request = StoredJSON.decode(DeviceRequest.self, try await store.get(Key.deviceCode(sid: sid, hash: hash))) else {
            return try await store.get(Key.usedDeviceCode(sid: sid, hash: hash)) == nil ? .unknown : .used
        }
        if let standing = DevicePoll.standing(of: request, clientID: clientID, now: clock.now) { return standing }
        guard try await store.setIfAbsent(Key.devicePoll(sid), [1], ttl: interval) else { return .tooSoon }
        guard let decision = StoredJSON.decode(DeviceDecision.self, try await store.get(Key.deviceDecision(sid))) else { return .pending }
        return .decided(sid: sid, request, decision)
    }

    /// Opens the device's session and consumes its device code in one step; nil when another poll
    /// did first, otherwise the sessions ended to keep the person within the limit.
    func redeemDevice(_ deviceCode: String, opening session: SessionRecord, sid: String, providerSessionID: String?) async throws -> [String]? {
        let hash = SHA256.hexHash(deviceCode)
        return try await open(
            session, sid: sid, providerSessionID: providerSessionID, once: .take(Key.deviceCode(sid: sid, hash: hash)),
            also: [.set(Key.usedDeviceCode(sid: sid, hash: hash), [1], ttl: settings.deviceCodeLifetime), .delete(Key.deviceDecision(sid))]
        )
    }
}

/// An RFC 8628 user code: 8 characters of §6.1's consonant alphabet, shown `XXXX-XXXX`. Its first
/// half finds the request, its second half proves the person saw it.
struct UserCode: Sendable, Equatable {
    static let alphabet = Array("BCDFGHJKLMNPQRSTVWXZ")
    /// `XXXX-XXXX`: what the code field takes (its `maxlength`), and what a refilled field shows.
    static let typedLength = 9

    let handle: String
    let check: String

    var display: String { handle + "-" + check }

    static func random() -> UserCode {
        // Rejection sampling keeps the 20 letters equally likely (256 is not a multiple of 20).
        var letters: [Character] = []
        while letters.count < 8 {
            for byte in SecureRandom.bytes(16) where byte < 240 && letters.count < 8 { letters.append(alphabet[Int(byte) % 20]) }
        }
        return UserCode(handle: String(letters[0..<4]), check: String(letters[4..<8]))
    }

    /// What a person typed: case, spaces and dashes do not matter; anything else outside the
    /// alphabet is not a user code.
    init?(typed: String) {
        guard typed.utf8.count <= 64 else { return nil }
        let letters = typed.uppercased().filter { $0 != "-" && $0 != " " }
        guard letters.count == 8, letters.allSatisfy(Self.alphabet.contains) else { return nil }
        handle = String(letters.prefix(4))
        check = String(letters.suffix(4))
    }

    private init(handle: String, check: String) {
        self.handle = handle
        self.check = check
    }
}

/// A device session opened by an app's approval lives and dies with the approving session: it is
/// listed under it before it opens (an entry without its session is harmless), capped at its end,
/// ended with it, and refused at refresh once it is gone (so a clean-up that failed still holds).
extension RelayStore {
    /// Links device session `sid` to the session that approved it, before the device session opens.
    func linkApproved(_ sid: String, to approver: String) async throws {
        _ = try await store.setAdd(Key.approvedSessions(approver), member: sid, ttl: settings.sessionLifetime)
    }

    /// Ends the device sessions `sid` approved (taken from its set as `sid` itself ended). Best
    /// effort: the approving session is gone already, and a device session whose approver is gone
    /// cannot refresh (``approverEnded(_:)``), so its access tokens die within their lifetime anyway.
    func endApprovedSessions(_ approved: Set<String>, of sid: String) async {
        for child in approved where child != sid {
            _ = try? await revoke(child, reason: .approverEnded)
        }
    }

    /// A step-up's new session `successor` (the same person, proven again) takes over the device
    /// sessions `sid` approved, before `sid` ends. Each is listed under the successor first, then
    /// re-pointed to it if it still names `sid` (compare-and-set on its record, read again when a
    /// refresh rewrote it meanwhile), then leaves `sid`'s list. Best effort: a device not moved
    /// ends with `sid`, as any approved device does (fail closed).
    func moveApprovals(of sid: String, to successor: String) async throws {
        for child in try await store.setMembers(Key.approvedSessions(sid)) where child != sid && child != successor {
            // An approver that expired meanwhile (idle) took its devices with it: nothing to revive.
            guard try await session(sid) != nil else { return }
            try await linkApproved(child, to: successor)
            for _ in 0..<3 {
                guard let (record, stored) = try await storedSession(child), record.origin.approvedBy == sid,
                    let idle = try await idleRemaining(child)
                else { break }
                var moved = record
                moved.origin.approvedBy = successor
                // Its idle deadline stays where it was: a step-up elsewhere is no use of this session.
                if try await store.apply([.set(Key.session(child), moved.stored, ttl: idle)], ifEqual: Key.session(child), stored) {
                    _ = try await store.setRemove(Key.approvedSessions(sid), member: child)
                    break
                }
            }
        }
    }

    /// True when `session` was approved by a session that has ended since. Read from the store,
    /// not the in-process liveness cache: this decides whether a session goes on living.
    func approverEnded(_ session: SessionRecord) async throws -> Bool {
        guard let approver = session.origin.approvedBy else { return false }
        return try await self.session(approver) == nil
    }
}
