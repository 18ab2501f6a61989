import Crypto
public import FoundationEssentials
import RelaisCrypto
import SwiftASN1
// The fixed-time expiry check: the verification time comes from the relay's clock (and `--at`).
@_spi(FixedExpiryValidationTime) public import X509

/// Verifies Apple App Attest objects as Apple's "Validating apps that connect to your server"
/// describes, step by step: attestations (once per app install) and assertions (afterwards).
public struct AppAttestVerifier: Sendable {
    /// Which App Attest environment the app's entitlement names.
    public enum Environment: String, Sendable, CaseIterable {
        case production, development

        /// The aaguid of an attestation made in this environment.
        var aaguid: [UInt8] {
            switch self {
            case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
            case .development: Array("appattestdevelop".utf8)
            }
        }
    }

    /// `TEAMID.bundle.id`.
    public let appID: String
    public let environment: Environment
    /// The roots a chain must end at: Apple's App Attestation Root CA unless a test says otherwise.
    public let roots: [Certificate]

    public init(appID: String, environment: Environment, roots: [Certificate] = [AppAttestVerifier.appleRoot]) {
        self.appID = appID
        self.environment = environment
        self.roots = roots
    }

    /// A key whose attestation verified: what to store to check its later assertions.
    public struct AttestedKey: Sendable, Equatable {
        /// The credential's P-256 public key as an uncompressed X9.62 point (65 bytes).
        public let publicKey: [UInt8]
        /// The counter to compare the next assertion with (0 after an attestation).
        public let counter: UInt32
        /// Apple's receipt, for the fraud-metric service.
        public let receipt: [UInt8]

        /// The public key as SubjectPublicKeyInfo PEM.
        public var publicKeyPEM: String {
            (try? P256.Signing.PublicKey(x963Representation: publicKey).pemRepresentation) ?? ""
        }
    }

    /// The nonce extension of the credential certificate.
    static let nonceExtension: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 8, 2]

    /// Checks an attestation object (`attestKey`'s output) made for `keyID` over `clientDataHash`,
    /// with the certificate chain checked at `time`.
    public func verifyAttestation(_ object: [UInt8], keyID: [UInt8], clientDataHash: [UInt8], at time: Date) async throws(AttestationError) -> AttestedKey {
        let decoded: CBORValue
        do { decoded = try CBORDecoder.decode(object) } catch { throw AttestationError(.appleMalformed, error.description) }
        guard decoded[text: "fmt"]?.textValue == "apple-appattest" else { throw AttestationError(.appleMalformed, "fmt is not apple-appattest") }
        guard let statement = decoded[text: "attStmt"], let chain = statement[text: "x5c"]?.arrayValue?.compactMap(\.bytesValue),
            chain.count >= 2, let authBytes = decoded[text: "authData"]?.bytesValue
        else { throw AttestationError(.appleMalformed, "attStmt.x5c (leaf and intermediate) and authData are required") }
        guard let authData = AuthenticatorData(authBytes), let credential = authData.credential else {
            throw AttestationError(.appleMalformed, "authData is truncated or holds no attested credential")
        }

        // 1. The chain, from the credential certificate to the pinned root, at `time`.
        let leaf: Certificate
        let intermediates: [Certificate]
        do {
            leaf = try Certificate(derEncoded: chain[0])
            intermediates = try chain.dropFirst().map { try Certificate(derEncoded: $0) }
        } catch {
            throw AttestationError(.appleMalformed, "an x5c entry is not a DER certificate")
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) { RFC5280Policy(fixedExpiryValidationTime: time) }
        if case .couldNotValidate(let failures) = await verifier.validate(leaf: leaf, intermediates: CertificateStore(intermediates)) {
            let why = failures.first.map { "\($0.policyFailureReason)" } ?? "no chain to the root"
            throw AttestationError(.appleChain, "the certificate chain does not verify to Apple's root at \(time.formatted(.iso8601)): \(why)")
        }

        // 2-4. nonce = SHA-256(authData ‖ clientDataHash) is what the credential certificate holds.
        let nonce = RelaisCrypto.SHA256.hash(authBytes + clientDataHash)
        guard let certified = Self.certifiedNonce(leaf) else { throw AttestationError(.appleNonce, "the credential certificate has no readable nonce extension") }
        guard ConstantTime.equals(certified, nonce) else { throw AttestationError(.appleNonce, "the certified nonce is not SHA-256(authData ‖ clientDataHash)") }

        // 5. The key id is the SHA-256 of the credential's public key.
        guard let publicKey = P256.Signing.PublicKey(leaf.publicKey) else { throw AttestationError(.appleKeyID, "the credential key is not a P-256 key") }
        let point = Array(publicKey.x963Representation)
        guard RelaisCrypto.SHA256.hash(point) == keyID else { throw AttestationError(.appleKeyID, "SHA-256 of the credential public key is not key_id") }

        // 6. The RP ID hash names this app.
        guard authData.rpIDHash == RelaisCrypto.SHA256.hash(appID) else { throw AttestationError(.appleAppID, "the RP ID hash is not SHA-256 of \(appID)") }
        // 7. A new key has never signed.
        guard authData.counter == 0 else { throw AttestationError(.appleCounter, "the counter is \(authData.counter), not 0") }
        // 8. The environment.
        guard credential.aaguid == environment.aaguid else {
            throw AttestationError(.appleEnvironment, "the attestation was made in the other App Attest environment than \(environment.rawValue)")
        }
        // 9. The credential id is the key id.
        guard credential.credentialID == keyID else { throw AttestationError(.appleCredentialID, "the credential id is not key_id") }
        return AttestedKey(publicKey: point, counter: 0, receipt: statement[text: "receipt"]?.bytesValue ?? [])
    }

    /// Checks an assertion (`generateAssertion`'s output) over `clientData` by an attested key, and
    /// returns its counter, which must be stored in place of `previousCounter`.
    public func verifyAssertion(_ assertion: [UInt8], clientData: [UInt8], publicKey: [UInt8], previousCounter: UInt32) throws(AttestationError) -> UInt32 {
        let decoded: CBORValue
        do { decoded = try CBORDecoder.decode(assertion) } catch { throw AttestationError(.appleAssertionMalformed, error.description) }
        guard let signature = decoded[text: "signature"]?.bytesValue, let authBytes = decoded[text: "authenticatorData"]?.bytesValue,
            let authData = AuthenticatorData(authBytes)
        else { throw AttestationError(.appleAssertionMalformed, "signature and authenticatorData are required") }
        let nonce = RelaisCrypto.SHA256.hash(authBytes + RelaisCrypto.SHA256.hash(clientData))
        // The key signs the nonce itself (ECDSA then hashes it once more), as Apple's sample server does.
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey),
            let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: signature),
            key.isValidSignature(ecdsa, for: Data(nonce))
        else { throw AttestationError(.appleAssertionSignature, "the signature does not verify with the attested key") }
        guard authData.rpIDHash == RelaisCrypto.SHA256.hash(appID) else { throw AttestationError(.appleAssertionAppID, "the RP ID hash is not SHA-256 of \(appID)") }
        guard authData.counter > previousCounter else {
            throw AttestationError(.appleAssertionCounter, "the counter \(authData.counter) is not greater than \(previousCounter)")
        }
        return authData.counter
    }

    /// The OCTET STRING of the nonce extension: `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
    static func certifiedNonce(_ certificate: Certificate) -> [UInt8]? {
        guard let ext = certificate.extensions[oid: nonceExtension] else { return nil }
        return try? DER.sequence(DER.parse(ext.value), identifier: .sequence) { nodes in
            try DER.explicitlyTagged(&nodes, tagNumber: 1, tagClass: .contextSpecific) { node in
                Array(try ASN1OctetString(derEncoded: node).bytes)
            }
        }
    }
}
