import RelaisAttest
import RelaisCrypto
public import RelaisJOSE

/// Play Integrity verdicts as Google makes them for classic requests: a JWS (ES256) by the
/// verification key, encrypted (A256KW, A256GCM) to the app's AES key; the two keys in the shape
/// the Play Console hands them out.
public struct PlayIntegrityFactory: Sendable {
    public static let package = "fr.example.relais"
    public static let digest = Base64URL.encode(SHA256.hash(Array("signing certificate".utf8)))

    public let signer: JWK
    public let aesKey: [UInt8]

    public init() throws {
        signer = try JWK.generate(for: .es256)
        aesKey = SecureRandom.bytes(32)
    }

    /// The decryption key, base64.
    public var decryptionKey: String { Base64.encode(aesKey) }
    /// The verification key, base64 DER SubjectPublicKeyInfo.
    public var verificationKey: String {
        (signer.publicKeyPEM() ?? "").split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }

    /// A verdict that passes a policy for ``package`` and ``digest``, for `hash` at `now`.
    public static func payload(hash: String, now: Double, _ change: (inout [String: JSONValue]) -> Void = { _ in }) -> [String: JSONValue] {
        var payload: [String: JSONValue] = [
            "requestDetails": .object([
                "requestPackageName": .string(package), "nonce": .string(hash), "timestampMillis": .string(String(Int(now * 1000) - 5000)),
            ]),
            "appIntegrity": .object([
                "appRecognitionVerdict": .string("PLAY_RECOGNIZED"), "packageName": .string(package),
                "certificateSha256Digest": .array([.string(digest)]), "versionCode": .string("42"),
            ]),
            "deviceIntegrity": .object(["deviceRecognitionVerdict": .array([.string("MEETS_DEVICE_INTEGRITY")])]),
            "accountDetails": .object(["appLicensingVerdict": .string("LICENSED")]),
        ]
        change(&payload)
        return payload
    }

    public func token(_ payload: [String: JSONValue], signer: JWK? = nil, aesKey: [UInt8]? = nil) throws -> String {
        let jws = try JWS.sign(payload: JSONValue.object(payload).serialized(), with: signer ?? self.signer, algorithm: .es256)
        return try JWE.encrypt(Array(jws.utf8), to: JWK(symmetric: aesKey ?? self.aesKey), keyAlgorithm: .a256KW, contentAlgorithm: .a256GCM)
    }
}

extension JSONValue {
    /// Sets a member of an object value (test helper).
    public mutating func set(_ name: String, _ value: JSONValue) {
        guard case .object(var object) = self else { return }
        object[name] = value
        self = .object(object)
    }
}
