/// A JWK Set (RFC 7517 §5), as a provider's `jwks_uri` or Relais' `/jwks.json` serves it.
///
/// A set holds several keys during a rotation; ``key(for:keyID:)`` picks the one a token names.
/// To keep a remote set fresh, use ``JWKSCache``.
public struct JWKSet: Sendable {
    /// The keys, in the order they were given or published.
    public let keys: [JWK]

    /// A set of keys already in hand (your own keys, or keys read from configuration).
    public init(keys: [JWK]) {
        self.keys = keys
    }

    /// Reads `{"keys":[…]}`. Members whose `kty` or curve Relais does not support are skipped (a
    /// provider may publish keys for others); a supported key that is malformed fails the whole set.
    public init(json: [UInt8]) throws(JOSEError) {
        guard let object = JSONValue.object(from: json), let members = object["keys"]?.arrayValue else {
            throw .invalidKey(reason: "a JWK Set is an object with a 'keys' array")
        }
        var keys: [JWK] = []
        for member in members {
            guard let memberObject = member.objectValue else { throw .invalidKey(reason: "every member of 'keys' must be an object") }
            do {
                keys.append(try JWK(object: memberObject))
            } catch let error {
                if case .invalidKey(let reason) = error, reason.hasPrefix("unsupported") { continue }
                throw error
            }
        }
        self.keys = keys
    }

    /// The public JWKS document: private and symmetric keys are never included.
    public func publicJSON() -> [UInt8] {
        JSONValue.object(["keys": .array(keys.compactMap { $0.publicJSON().map(JSONValue.object) })]).serialized()
    }

    /// The one key that may verify a token with this `alg` and `kid`.
    ///
    /// Candidates must suit the algorithm (type, curve, pinned `alg`) and not be restricted to `enc`.
    /// With a `kid`, the key must carry that `kid`. Without one, exactly one candidate must remain:
    /// guessing among several keys would let the weakest one decide.
    public func key(for algorithm: JWSAlgorithm, keyID: String?) throws(JOSEError) -> JWK {
        let usable = keys.filter { key in
            guard key.use == nil || key.use == "sig" else { return false }
            return (try? key.check(for: algorithm)) != nil
        }
        if let keyID {
            guard let match = usable.first(where: { $0.keyID == keyID }) else {
                throw .noMatchingKey(reason: "no \(algorithm.rawValue) key with kid '\(keyID)'")
            }
            return match
        }
        guard usable.count == 1 else {
            throw .noMatchingKey(
                reason: usable.isEmpty
                    ? "no key suits \(algorithm.rawValue)"
                    : "the token has no kid and \(usable.count) keys suit \(algorithm.rawValue)"
            )
        }
        return usable[0]
    }
}
