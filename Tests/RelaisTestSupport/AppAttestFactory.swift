public import Crypto
public import Foundation
public import RelaisAttest
import SwiftASN1
public import X509

/// A CBOR encoder for building test objects (the relay only decodes).
public enum CBORWriter {
    public static func encode(_ value: CBORValue) -> [UInt8] {
        switch value {
        case .unsigned(let number): head(0, number)
        case .negative(let number): head(1, number)
        case .bytes(let bytes): head(2, UInt64(bytes.count)) + bytes
        case .text(let text): head(3, UInt64(text.utf8.count)) + Array(text.utf8)
        case .array(let items): head(4, UInt64(items.count)) + items.flatMap(encode)
        case .map(let entries): head(5, UInt64(entries.count)) + entries.flatMap { encode($0.key) + encode($0.value) }
        case .bool(let flag): [flag ? 0xf5 : 0xf4]
        case .null: [0xf6]
        case .undefined: [0xf7]
        }
    }

    static func head(_ major: UInt8, _ argument: UInt64) -> [UInt8] {
        let type = major << 5
        switch argument {
        case 0..<24: return [type | UInt8(argument)]
        case 24..<256: return [type | 24, UInt8(argument)]
        case 256..<65536: return [type | 25, UInt8(argument >> 8), UInt8(argument & 0xff)]
        default: return [type | 26] + (0..<4).reversed().map { UInt8((argument >> (8 * UInt64($0))) & 0xff) }
        }
    }

    public static func map(_ entries: [(String, CBORValue)]) -> CBORValue {
        .map(entries.map { CBORValue.MapEntry(key: .text($0.0), value: $0.1) })
    }
}

/// Builds App Attest attestations and assertions as an iPhone would, with a test CA standing in
/// for Apple's: root → intermediate → credential certificate holding the nonce extension. Each
/// field can be spoiled to exercise one verification step.
public struct AppAttestFactory: Sendable {
    public static let appID = "ABCDE12345.fr.example.relais"
    /// Now, to the second: certificates are valid around it, so relay tests on a real-time clock accept them.
    public static let issued = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))

    public let rootKey = P256.Signing.PrivateKey()
    public let intermediateKey = P256.Signing.PrivateKey()
    public let credentialKey = P256.Signing.PrivateKey()
    public let root: Certificate
    public let intermediate: Certificate

    public init() throws {
        let rootName = try DistinguishedName { CommonName("Test App Attestation Root CA") }
        let intermediateName = try DistinguishedName { CommonName("Test App Attestation CA 1") }
        let caExtensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
        }
        root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: Self.issued - 86400 * 365,
            notValidAfter: Self.issued + 86400 * 3650, issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: caExtensions, issuerPrivateKey: .init(rootKey)
        )
        intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: Self.issued - 86400 * 30,
            notValidAfter: Self.issued + 86400 * 365, issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: caExtensions, issuerPrivateKey: .init(rootKey)
        )
    }

    public var keyID: [UInt8] { Array(Crypto.SHA256.hash(data: credentialKey.publicKey.x963Representation)) }

    /// What can be spoiled in an attestation.
    public struct Attestation {
        public var appID = AppAttestFactory.appID
        public var counter: UInt32 = 0
        public var aaguid: [UInt8] = Array("appattestdevelop".utf8)
        public var credentialID: [UInt8]?
        public var nonceOverride: [UInt8]?
        public var leafValidity: (Date, Date) = (AppAttestFactory.issued - 60, AppAttestFactory.issued + 86400 * 3)
        public var format = "apple-appattest"
        public var withNonceExtension = true
        public init() {}
    }

    public func authenticatorData(appID: String, counter: UInt32, attested: (aaguid: [UInt8], credentialID: [UInt8])?) -> [UInt8] {
        var bytes = Array(Crypto.SHA256.hash(data: Array(appID.utf8)))
        bytes.append(attested == nil ? 0x01 : 0x41)
        bytes += (0..<4).reversed().map { UInt8((counter >> (8 * UInt32($0))) & 0xff) }
        if let attested {
            let point = Array(credentialKey.publicKey.x963Representation)
            let cose = CBORWriter.encode(
                .map([
                    .init(key: .unsigned(1), value: .unsigned(2)), .init(key: .unsigned(3), value: .negative(6)),
                    .init(key: .negative(0), value: .unsigned(1)), .init(key: .negative(1), value: .bytes(Array(point[1..<33]))),
                    .init(key: .negative(2), value: .bytes(Array(point[33..<65]))),
                ])
            )
            bytes += attested.aaguid + [UInt8(attested.credentialID.count >> 8), UInt8(attested.credentialID.count & 0xff)] + attested.credentialID + cose
        }
        return bytes
    }

    public func attestation(clientDataHash: [UInt8], _ spoil: (inout Attestation) -> Void = { _ in }) throws -> [UInt8] {
        var options = Attestation()
        spoil(&options)
        let authData = authenticatorData(appID: options.appID, counter: options.counter, attested: (options.aaguid, options.credentialID ?? keyID))
        let nonce = options.nonceOverride ?? Array(Crypto.SHA256.hash(data: authData + clientDataHash))
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { sequence in
            try sequence.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 1, tagClass: .contextSpecific)) { tagged in
                try tagged.serialize(ASN1OctetString(contentBytes: ArraySlice(nonce)))
            }
        }
        var extensions = [try Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true)]
        if options.withNonceExtension {
            extensions.append(Certificate.Extension(oid: [1, 2, 840, 113635, 100, 8, 2], critical: false, value: ArraySlice(serializer.serializedBytes)))
        }
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(credentialKey.publicKey), notValidBefore: options.leafValidity.0,
            notValidAfter: options.leafValidity.1, issuer: intermediate.subject,
            subject: try DistinguishedName { CommonName(keyID.map { String(format: "%02x", $0) }.joined()) }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions(extensions), issuerPrivateKey: .init(intermediateKey)
        )
        let chain: [CBORValue] = [.bytes(try Self.der(leaf)), .bytes(try Self.der(intermediate))]
        return CBORWriter.encode(
            CBORWriter.map([
                ("fmt", .text(options.format)), ("attStmt", CBORWriter.map([("x5c", .array(chain)), ("receipt", .bytes([1, 2, 3]))])),
                ("authData", .bytes(authData)),
            ])
        )
    }

    /// An assertion over `clientData` with `counter`, signed by `key` (the credential key by default).
    public func assertion(clientData: [UInt8], counter: UInt32, appID: String = AppAttestFactory.appID, key: P256.Signing.PrivateKey? = nil) throws -> [UInt8] {
        let authData = authenticatorData(appID: appID, counter: counter, attested: nil)
        let nonce = Array(Crypto.SHA256.hash(data: authData + Array(Crypto.SHA256.hash(data: clientData))))
        let signature = try (key ?? credentialKey).signature(for: nonce)
        return CBORWriter.encode(CBORWriter.map([("signature", .bytes(Array(signature.derRepresentation))), ("authenticatorData", .bytes(authData))]))
    }

    public static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}
