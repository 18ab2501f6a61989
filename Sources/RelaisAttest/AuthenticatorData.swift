/// WebAuthn authenticator data as App Attest lays it out: rpIdHash (32) ‖ flags (1) ‖ signCount
/// (4, big-endian) ‖ [aaguid (16) ‖ credentialIdLength (2) ‖ credentialId ‖ COSE key], the
/// bracketed part only in an attestation (flag AT).
struct AuthenticatorData: Sendable {
    var rpIDHash: [UInt8]
    var flags: UInt8
    var counter: UInt32
    var credential: AttestedCredential?

    struct AttestedCredential: Sendable {
        var aaguid: [UInt8]
        var credentialID: [UInt8]
        var publicKey: CBORValue
    }

    static let attestedCredentialFlag: UInt8 = 0x40

    /// Nil when the bytes are shorter than their own lengths say or the key is not CBOR.
    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 37 else { return nil }
        rpIDHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        guard flags & Self.attestedCredentialFlag != 0 else {
            credential = nil
            return
        }
        guard bytes.count >= 55 else { return nil }
        let aaguid = Array(bytes[37..<53])
        let idLength = Int(bytes[53]) << 8 | Int(bytes[54])
        guard bytes.count >= 55 + idLength + 1 else { return nil }
        let credentialID = Array(bytes[55..<55 + idLength])
        guard let key = try? CBORDecoder.decodePrefix(bytes, at: 55 + idLength) else { return nil }
        credential = AttestedCredential(aaguid: aaguid, credentialID: credentialID, publicKey: key.value)
    }
}
