import FoundationEssentials
import RelaisCrypto
import RelaisServer
import RelaisStore

/// A failure the development provider produces on purpose, written `target:kind[=value]`:
/// `token:status=503`, `userinfo:delay=2000`, `id_token:wrong_nonce`. docs/dev-provider.md lists them.
struct Fault: Codable, Sendable, Equatable {
    enum Target: String, Codable, Sendable, CaseIterable {
        case discovery, authorize, token, userinfo, jwks, logout
        /// The id_token inside the token response.
        case idToken = "id_token"
    }

    enum Kind: String, Codable, Sendable, CaseIterable {
        /// Wait `value` milliseconds before answering.
        case delay
        /// Answer with HTTP status `value` (500, 503, ...) and a FranceConnect-like error body.
        case status
        /// A body that is not JSON (or not a JWT).
        case malformed
        /// The whole body announced, half of it sent, then the connection dropped.
        case truncated
        case wrongNonce = "wrong_nonce"
        case wrongIssuer = "wrong_iss"
        case wrongAudience = "wrong_aud"
        case expired
        case badSignature = "bad_signature"
        case missingKeyID = "missing_kid"
        case algNone = "alg_none"
        /// userinfo only: a `sub` other than the id_token's.
        case subMismatch = "sub_mismatch"
        /// userinfo only: the access token is taken from a POSTed form only (RFC 6750 §2.2), a
        /// token in the Authorization header is refused.
        case tokenInBodyOnly = "token_in_body_only"
        /// id_token only: `auth_time` an hour old, as a provider that ignored `prompt=login` says.
        case staleAuthTime = "stale_auth_time"
        /// id_token only: no `auth_time` at all.
        case noAuthTime = "no_auth_time"
        /// id_token only: an `at_hash` that is another access token's.
        case wrongAccessTokenHash = "wrong_at_hash"
    }

    var target: Target
    var kind: Kind
    var value: Int?

    static let transportKinds: Set<Kind> = [.delay, .status, .malformed, .truncated]
    static let tokenKinds: Set<Kind> = [.wrongNonce, .wrongIssuer, .wrongAudience, .expired, .badSignature, .missingKeyID, .algNone, .wrongAccessTokenHash]

    /// Parses `target:kind[=value]`, with a message naming what is wrong.
    static func parse(_ text: String) -> Result<Fault, FaultSyntaxError> {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let target = Target(rawValue: parts[0]) else {
            return .failure(FaultSyntaxError("'\(text)': expected target:kind, target one of \(Target.allCases.map(\.rawValue).joined(separator: ", "))"))
        }
        let kindParts = parts[1].split(separator: "=", maxSplits: 1).map(String.init)
        guard let kind = Kind(rawValue: kindParts[0]) else {
            return .failure(FaultSyntaxError("'\(text)': unknown fault kind '\(kindParts[0])'"))
        }
        var value: Int?
        if kindParts.count == 2 {
            guard let number = Int(kindParts[1]), number >= 0 else { return .failure(FaultSyntaxError("'\(text)': the value must be a whole number")) }
            value = number
        }
        let fault = Fault(target: target, kind: kind, value: value)
        if let problem = fault.problem { return .failure(FaultSyntaxError("'\(text)': \(problem)")) }
        return .success(fault)
    }

    private var problem: String? {
        switch kind {
        case .delay:
            guard let value, value <= 60_000 else { return "delay needs a value in milliseconds, at most 60000" }
        case .status:
            guard let value, (400...599).contains(value) else { return "status needs an HTTP error status (400-599)" }
        case .malformed, .truncated:
            guard target != .idToken, target != .authorize else { return "\(kind.rawValue) applies to a response body (discovery, token, userinfo, jwks)" }
        case .subMismatch, .tokenInBodyOnly:
            guard target == .userinfo else { return "\(kind.rawValue) applies to userinfo" }
        case .wrongNonce, .staleAuthTime, .noAuthTime, .wrongAccessTokenHash:
            guard target == .idToken else { return "\(kind.rawValue) applies to id_token" }
        default:
            guard target == .idToken || target == .userinfo else { return "\(kind.rawValue) applies to id_token or userinfo" }
        }
        if kind != .delay && kind != .status && value != nil { return "\(kind.rawValue) takes no value" }
        return nil
    }

    var text: String { "\(target.rawValue):\(kind.rawValue)" + (value.map { "=\($0)" } ?? "") }
}

struct FaultSyntaxError: Error, Equatable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fault armed through the test API: for one client or all, once or until cleared.
struct FaultRule: Codable, Sendable, Equatable {
    var id: String
    var fault: Fault
    var clientID: String?
    var once: Bool
}

/// Armed faults live in the store, so every instance of the provider (and a restarted one) sees them.
/// A one-shot fault is consumed with GETDEL: two concurrent requests cannot both take it.
struct FaultBook: Sendable {
    let store: any KeyValueStore
    /// Faults from the configuration (`clients.<id>.faults`), applied to every request of that client.
    let configured: [String: [Fault]]

    func arm(_ fault: Fault, clientID: String?, once: Bool) async throws -> FaultRule {
        let rule = FaultRule(id: SecureRandom.token(bits: 64), fault: fault, clientID: clientID, once: once)
        try await store.set(StoreKeys.fault(rule.id), StoredJSON.encode(rule), ttl: nil)
        try await store.setAdd(StoreKeys.faultIndex, member: rule.id, ttl: nil)
        return rule
    }

    func armed() async throws -> [FaultRule] {
        var rules: [FaultRule] = []
        for id in try await store.setMembers(StoreKeys.faultIndex).sorted() {
            if let rule = StoredJSON.decode(FaultRule.self, try await store.get(StoreKeys.fault(id))) { rules.append(rule) }
        }
        return rules
    }

    func clear() async throws {
        for id in try await store.setMembers(StoreKeys.faultIndex) {
            _ = try await store.delete(StoreKeys.fault(id))
            _ = try await store.setRemove(StoreKeys.faultIndex, member: id)
        }
    }

    /// The faults that apply to this request, one-shot ones consumed.
    func take(_ targets: Set<Fault.Target>, clientID: String?) async throws -> [Fault] {
        var faults = (clientID.flatMap { configured[$0] } ?? []).filter { targets.contains($0.target) }
        let ids = try await store.setMembers(StoreKeys.faultIndex)
        guard !ids.isEmpty else { return faults }
        for id in ids.sorted() {
            guard let rule = StoredJSON.decode(FaultRule.self, try await store.get(StoreKeys.fault(id))),
                targets.contains(rule.fault.target),
                rule.clientID == nil || rule.clientID == clientID
            else { continue }
            if rule.once {
                guard try await store.getAndDelete(StoreKeys.fault(id)) != nil else { continue }  // another request took it
                _ = try await store.setRemove(StoreKeys.faultIndex, member: id)
            }
            faults.append(rule.fault)
        }
        return faults
    }
}

extension Array where Element == Fault {
    func first(_ kind: Fault.Kind, on target: Fault.Target) -> Fault? { first { $0.kind == kind && $0.target == target } }
    func has(_ kind: Fault.Kind, on target: Fault.Target) -> Bool { first(kind, on: target) != nil }
}
