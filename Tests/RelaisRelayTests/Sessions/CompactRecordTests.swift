import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Session records in their compact stored form: every field comes back, JSON records written
/// before still read, and a damaged record reads as absent (never a trap, never a wrong session).
@Suite(.tags(.fast)) struct CompactRecordTests {
    static let key = JWK(symmetric: Array(repeating: 7, count: 32), keyID: "dev-session-3b63b42bd8c4", algorithm: "dir")

    static func sealed(_ identity: String = String(repeating: "eyJhbGciOiJSUzI1NiJ9.", count: 30)) throws -> String {
        try JWE.encrypt(Array(#"{"claims":{"given_name":"Angela"},"provider_id_token":"\#(identity)"}"#.utf8), to: key, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
    }

    static func record(sealed: String, acr: String? = "eidas1", attested: ClientAttested? = nil, device: String? = nil) -> SessionRecord {
        var record = SessionRecord(
            clientID: "bench-app", subject: "a7980eaaf61a4b8c5ff48c4d5ede7479521514c9c4a97a62bceec8176446e971v1", providerID: "fc",
            scopes: ["openid", "profile", "email"], acr: acr, createdAt: 1_795_561_103.6369503, expiresAt: 1_803_337_103.6369503, sealedIdentity: sealed
        )
        record.origin.attested = attested
        record.origin.device = device
        return record
    }

    static func same(_ a: SessionRecord?, _ b: SessionRecord) -> Bool {
        guard let a else { return false }
        return a.clientID == b.clientID && a.subject == b.subject && a.providerID == b.providerID && a.scopes == b.scopes && a.acr == b.acr
            && a.span == b.span && a.sealedIdentity == b.sealedIdentity && a.origin == b.origin
    }

    @Test(
        arguments: [
            (nil, nil, nil), ("eidas1", nil, nil), ("eidas2", ClientAttested(platform: "ios", thumbprint: "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"), "Pixel 9 de Léa"),
            (nil, nil, "iPhone"),
        ] as [(String?, ClientAttested?, String?)])
    func everyFieldComesBack(acr: String?, attested: ClientAttested?, device: String?) throws {
        let record = Self.record(sealed: try Self.sealed(), acr: acr, attested: attested, device: device)
        let stored = record.stored
        #expect(stored.first == SessionRecord.compactFormat)
        #expect(Self.same(SessionRecord(stored: stored), record))
        // The identity still opens with the session key: the header (its AAD) came back byte for byte.
        let opened = try JWE.parse(try #require(SessionRecord(stored: stored)).sealedIdentity).decrypt(with: Self.key)
        #expect(JSONValue.object(from: opened.plaintext)?["claims"]?.objectValue?["given_name"]?.stringValue == "Angela")
    }

    @Test func aRecordWrittenAsJSONStillReads() throws {
        let record = Self.record(sealed: try Self.sealed(), attested: ClientAttested(platform: "android", thumbprint: "t"), device: "d")
        let json = StoredJSON.encode(record)
        #expect(json.first == UInt8(ascii: "{"))
        #expect(Self.same(SessionRecord(stored: json), record))
    }

    @Test func theCompactFormIsFarSmallerThanJSON() throws {
        let record = Self.record(sealed: try Self.sealed())
        let json = StoredJSON.encode(record).count, compact = record.stored.count
        // The base64url of the sealed identity and the field names were most of it.
        #expect(Double(compact) <= 0.8 * Double(json), "compact \(compact) B, JSON \(json) B")
    }

    @Test func aSealedValueThatWouldNotComeBackIdenticalIsKeptAsText() throws {
        // Not canonical base64url in the tag (16 bytes in 22 characters leave 4 spare bits, and "B"
        // sets one), or not a `dir` JWE: stored as they are, since rebuilding them would change the text.
        let sealed = try Self.sealed()
        var parts = sealed.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        parts[4] = String(parts[4].dropLast()) + "B"
        for odd in [parts.joined(separator: "."), "not-a-jwe", "a.b.c.d.e"] {
            let record = Self.record(sealed: odd)
            #expect(SessionRecord(stored: record.stored)?.sealedIdentity == odd)
        }
    }

    /// Rotations (generation, last refresh) and the DPoP key of the refresh tokens.
    @Test func theRefreshStateAndTheDPoPKeyComeBack() throws {
        var record = Self.record(sealed: try Self.sealed(), device: "d")
        record.origin.dpopKey = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        #expect(Self.same(SessionRecord(stored: record.stored), record))
        record.span.generation = 300
        record.span.refreshedAt = 1_795_561_503.25
        #expect(Self.same(SessionRecord(stored: record.stored), record))
        record.origin.dpopKey = nil
        #expect(Self.same(SessionRecord(stored: record.stored), record))
    }

    /// Relais' own header is stored as its key id; any other header as bytes, and both come back
    /// byte for byte (the header is the AES-GCM additional data).
    @Test func aSealedHeaderIsStoredAsItsKeyIDOnlyWhenItIsRelaisOwn() throws {
        let own = try Self.sealed()
        let other = try JWE.encrypt(Array("{}".utf8), to: Self.key, keyAlgorithm: .direct, contentAlgorithm: .a256GCM, extraHeader: ["cty": .string("x")])
        let noKeyID = try JWE.encrypt(
            Array("{}".utf8), to: JWK(symmetric: Array(repeating: 7, count: 32), keyID: nil, algorithm: "dir"), keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
        for sealed in [own, other, noKeyID] {
            let back = try #require(SessionRecord(stored: Self.record(sealed: sealed).stored))
            #expect(back.sealedIdentity == sealed)
        }
        var writer = CompactWriter(format: 1)
        writer.sealed(own)
        #expect(writer.bytes[1] == 2)
        writer = CompactWriter(format: 1)
        writer.sealed(other)
        #expect(writer.bytes[1] == 1)
    }

    @Test func aDamagedRecordReadsAsAbsent() throws {
        var record = Self.record(sealed: try Self.sealed(), attested: ClientAttested(platform: "ios", thumbprint: "t"), device: "d")
        record.span.generation = 2
        record.span.refreshedAt = 1
        record.origin.dpopKey = "k"
        let stored = record.stored
        // Every truncation, a byte more, and unknown flags or sealed-form tags.
        for length in 0..<stored.count { #expect(SessionRecord(stored: Array(stored.prefix(length))) == nil, "cut at \(length)") }
        #expect(SessionRecord(stored: stored + [0]) == nil)
        var flags = stored
        flags[1] |= 0x40
        #expect(SessionRecord(stored: flags) == nil)
        #expect(SessionRecord(stored: [SessionRecord.compactFormat] + Array(repeating: 0xFF, count: 40)) == nil)
        #expect(SessionRecord(stored: nil) == nil)
        #expect(SessionRecord(stored: Array("garbage".utf8)) == nil)
    }

    /// What a trim orders a person's sessions by, read from the head of the record alone: the
    /// same span as the whole record gives, in both forms; nil where the head is damaged.
    @Test func theLifetimeReadsFromTheHeadOfEitherForm() throws {
        var record = Self.record(sealed: try Self.sealed(), acr: nil, attested: ClientAttested(platform: "ios", thumbprint: "t"), device: "d")
        record.span.refreshedAt = 1
        for scopes in [[], ["openid"], ["openid", "profile", "email"]] {
            record.scopes = scopes
            let lifetime = try #require(SessionRecord.lifetime(stored: record.stored))
            #expect(lifetime.createdAt == record.span.createdAt && lifetime.expiresAt == record.span.expiresAt)
            let fromJSON = try #require(SessionRecord.lifetime(stored: StoredJSON.encode(record)))
            #expect(fromJSON.createdAt == record.span.createdAt && fromJSON.expiresAt == record.span.expiresAt)
        }
        // Cut anywhere before the end of expiresAt (the head: 1 + 1 + 4 strings + count + 16 bytes).
        let stored = record.stored
        let head =
            1 + 1 + (1 + record.clientID.utf8.count) + (1 + record.subject.utf8.count) + (1 + record.providerID.utf8.count) + 1
            + record.scopes.reduce(0) { $0 + 1 + $1.utf8.count } + 16
        for length in 0..<head { #expect(SessionRecord.lifetime(stored: Array(stored.prefix(length))) == nil, "cut at \(length)") }
        #expect(SessionRecord.lifetime(stored: Array(stored.prefix(head))) != nil)
        var flags = stored
        flags[1] |= 0x40
        #expect(SessionRecord.lifetime(stored: flags) == nil)
        #expect(SessionRecord.lifetime(stored: nil) == nil)
        #expect(SessionRecord.lifetime(stored: Array("garbage".utf8)) == nil)
    }
}
