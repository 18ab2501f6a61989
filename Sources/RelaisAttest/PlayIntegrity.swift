import RelaisCrypto
public import RelaisJOSE

/// What the app's Play Integrity verdict must show, from the app team's Play Console.
public struct PlayIntegrityPolicy: Sendable {
    /// The Android application id (`fr.example.app`).
    public var packageName: String
    /// SHA-256 digests of the app signing certificates, base64url as the verdict spells them (hex
    /// with or without colons, as the Play Console shows them, is accepted too).
    public var certificateDigests: [String]
    public var deviceIntegrity: DeviceLevel = .device
    /// How old a verdict may be (`requestDetails.timestampMillis`).
    public var maxAge: Duration = .seconds(300)

    /// The least `deviceRecognitionVerdict` accepted; each level implies the ones below.
    public enum DeviceLevel: String, Sendable, CaseIterable {
        case basic, device, strong

        var accepted: Set<String> {
            switch self {
            case .basic: ["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"]
            case .device: ["MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"]
            case .strong: ["MEETS_STRONG_INTEGRITY"]
            }
        }
    }

    public init(packageName: String, certificateDigests: [String]) {
        self.packageName = packageName
        self.certificateDigests = certificateDigests
    }

    /// A digest in the verdict's spelling (base64url, no padding), from any of the spellings above.
    public static func normalizedDigest(_ digest: String) -> String? {
        let hex = digest.filter { $0 != ":" }
        if hex.utf8.count == 64, hex.utf8.allSatisfy({ Hex.value(of: $0) != nil }) {
            let bytes = stride(from: 0, to: 64, by: 2).map { index -> UInt8 in
                let utf8 = Array(hex.utf8)
                return Hex.value(of: utf8[index])! << 4 | Hex.value(of: utf8[index + 1])!
            }
            return Base64URL.encode(bytes)
        }
        let unpadded = String(digest.filter { $0 != "=" }.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
        guard let bytes = Base64URL.decode(unpadded), bytes.count == 32 else { return nil }
        return Base64URL.encode(bytes)
    }
}

/// Turns an integrity token into its verdict payload: locally with the Play Console's keys
/// (classic requests) or through Google's decodeIntegrityToken service (standard requests).
public protocol PlayIntegrityDecoder: Sendable {
    func decode(_ token: String, packageName: String) async throws(AttestationError) -> [String: JSONValue]
}

/// Classic requests: the token is a JWE (A256KW, A256GCM) holding a JWS (ES256), with the two keys
/// the app team downloads from the Play Console ("Response encryption"). No call to Google.
public struct PlayIntegrityLocalDecoder: PlayIntegrityDecoder {
    let decryptionKey: JWK
    let verificationKey: JWK

    /// - Parameters:
    ///   - decryptionKey: the base64 AES-256 key, as the Play Console gives it.
    ///   - verificationKey: the base64 DER SubjectPublicKeyInfo of the EC P-256 key, as the Play Console gives it.
    public init(decryptionKey: String, verificationKey: String) throws(AttestationError) {
        let trimmed = { (text: String) in text.filter { !$0.isWhitespace } }
        guard let secret = Base64.decode(trimmed(decryptionKey)) ?? Base64URL.decode(trimmed(decryptionKey)), secret.count == 32 else {
            throw AttestationError(.playDecryption, "the decryption key is not 32 bytes of base64")
        }
        guard let der = Base64.decode(trimmed(verificationKey)) else { throw AttestationError(.playSignature, "the verification key is not base64") }
        let pem = "-----BEGIN PUBLIC KEY-----\n" + Base64.encode(der) + "\n-----END PUBLIC KEY-----\n"
        guard let key = try? JWK(pem: pem), key.keyType == .ec, key.curve == .p256, !key.isPrivate else {
            throw AttestationError(.playSignature, "the verification key is not an EC P-256 public key")
        }
        self.decryptionKey = JWK(symmetric: secret)
        self.verificationKey = key
    }

    public func decode(_ token: String, packageName: String) async throws(AttestationError) -> [String: JSONValue] {
        guard let jwe = try? JWE.parse(token) else { throw AttestationError(.playMalformed, "the integrity token is not a compact JWE") }
        guard jwe.keyAlgorithm == .a256KW, jwe.contentAlgorithm == .a256GCM else {
            throw AttestationError(.playDecryption, "the token uses \(jwe.keyAlgorithm.rawValue)/\(jwe.contentAlgorithm.rawValue), not A256KW/A256GCM")
        }
        guard let decrypted = try? jwe.decrypt(with: decryptionKey) else { throw AttestationError(.playDecryption, "the token does not decrypt with the configured key") }
        guard let jws = try? JWS.parse(decrypted.plaintextString) else { throw AttestationError(.playMalformed, "the decrypted token is not a compact JWS") }
        guard jws.algorithm == .es256, (try? jws.verify(with: verificationKey)) != nil else {
            throw AttestationError(.playSignature, "the verdict is not signed (ES256) by the configured verification key")
        }
        guard let payload = JSONValue.object(from: jws.payload) else { throw AttestationError(.playMalformed, "the verdict is not a JSON object") }
        return payload
    }
}

/// The verdict fields Relais acted on.
public struct PlayIntegrityVerdict: Sendable, Equatable {
    public let deviceVerdicts: [String]
    public let versionCode: String?
    public let licensing: String?
}

/// Checks a verdict against the policy and the expected request hash.
public struct PlayIntegrityVerifier: Sendable {
    public let policy: PlayIntegrityPolicy
    public let decoder: any PlayIntegrityDecoder

    public init(policy: PlayIntegrityPolicy, decoder: any PlayIntegrityDecoder) {
        self.policy = policy
        self.decoder = decoder
    }

    /// What the app puts in the request (`nonce` for classic requests, `requestHash` for standard
    /// ones): base64url(SHA-256(challenge ‖ thumbprint)), binding the verdict to Relais' one-time
    /// challenge and to the app-instance key that will sign its proofs.
    public static func requestHash(challenge: String, thumbprint: String) -> String {
        Base64URL.encode(SHA256.hash(Array(challenge.utf8) + Array(thumbprint.utf8)))
    }

    /// - Parameter now: seconds since 1970, from the caller's clock.
    public func verify(_ token: String, expectedHash: String, now: Double) async throws(AttestationError) -> PlayIntegrityVerdict {
        let payload = try await decoder.decode(token, packageName: policy.packageName)
        return try check(payload, expectedHash: expectedHash, now: now)
    }

    func check(_ payload: [String: JSONValue], expectedHash: String, now: Double) throws(AttestationError) -> PlayIntegrityVerdict {
        guard let request = payload["requestDetails"]?.objectValue, let app = payload["appIntegrity"]?.objectValue,
            let device = payload["deviceIntegrity"]?.objectValue
        else { throw AttestationError(.playMalformed, "the verdict lacks requestDetails, appIntegrity or deviceIntegrity") }
        guard request["requestPackageName"]?.stringValue == policy.packageName else {
            throw AttestationError(.playPackage, "the request was made by another package than \(policy.packageName)")
        }
        guard let echoed = request["nonce"]?.stringValue ?? request["requestHash"]?.stringValue,
            ConstantTime.equals(echoed.filter { $0 != "=" }, expectedHash)
        else { throw AttestationError(.playNonce, "the verdict's nonce or requestHash is not the hash of this challenge and key") }
        guard let millis = request["timestampMillis"].flatMap({ $0.numberValue ?? $0.stringValue.flatMap(Double.init) }) else {
            throw AttestationError(.playMalformed, "requestDetails.timestampMillis is missing")
        }
        let age = now - millis / 1000
        guard age <= Double(policy.maxAge.components.seconds), age >= -60 else {
            throw AttestationError(.playStale, "the verdict is \(Int(age)) s old (at most \(policy.maxAge.components.seconds) s)")
        }
        guard app["appRecognitionVerdict"]?.stringValue == "PLAY_RECOGNIZED" else {
            throw AttestationError(.playAppUnrecognized, "appRecognitionVerdict is \(app["appRecognitionVerdict"]?.stringValue ?? "missing"), not PLAY_RECOGNIZED")
        }
        guard app["packageName"]?.stringValue == policy.packageName else { throw AttestationError(.playPackage, "appIntegrity.packageName is not \(policy.packageName)") }
        let allowed = Set(policy.certificateDigests.compactMap(PlayIntegrityPolicy.normalizedDigest))
        let digests = app["certificateSha256Digest"]?.arrayValue?.compactMap(\.stringValue).compactMap(PlayIntegrityPolicy.normalizedDigest) ?? []
        guard digests.contains(where: allowed.contains) else {
            throw AttestationError(.playCertificate, "the app is signed with a certificate that is not among the configured digests")
        }
        let verdicts = device["deviceRecognitionVerdict"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard verdicts.contains(where: policy.deviceIntegrity.accepted.contains) else {
            throw AttestationError(.playDevice, "the device verdict [\(verdicts.joined(separator: ", "))] does not meet \(policy.deviceIntegrity.rawValue) integrity")
        }
        let versionCode = app["versionCode"].flatMap { $0.stringValue ?? $0.numberValue.map { String(Int($0)) } }
        return PlayIntegrityVerdict(
            deviceVerdicts: verdicts, versionCode: versionCode, licensing: payload["accountDetails"]?.objectValue?["appLicensingVerdict"]?.stringValue
        )
    }
}
