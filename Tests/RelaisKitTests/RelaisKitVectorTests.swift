import Crypto
import Foundation
import RelaisTestSupport
import Testing

@testable import RelaisKit

/// The pure parts, checked against Tests/RelaisKitTests/Vectors (the files docs/client-protocol.md
/// gives other implementations).
@Suite struct RelaisKitVectorTests {
    static func vector(_ name: String) throws -> [String: Any] {
        let url = try #require(Bundle.module.url(forResource: "Vectors/\(name)", withExtension: "json"))
        return try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    static let session = SessionSummary(acr: "eidas1", accessTokenExpiresAt: Date(timeIntervalSince1970: 1_767_225_900), dpopThumbprint: nil, attested: nil, sessionID: "s1")

    static func state(_ name: String) -> ClientState {
        let parts = name.split(separator: ":", maxSplits: 1).map(String.init)
        switch parts[0] {
        case "signed_out": return .signedOut
        case "authorizing": return .authorizing
        case "exchanging_code": return .exchangingCode
        case "signed_in": return .signedIn(session)
        case "refreshing": return .refreshing(session)
        case "step_up_required": return .stepUpRequired(acr: parts[1], session: session)
        case "signing_out": return .signingOut
        case "storage_locked": return .storageLocked
        default: return .failed(RelaisKitError(RelaisKitErrorCode(parts[1]), "vector"))
        }
    }

    static func event(_ name: String) -> ClientEvent {
        let parts = name.split(separator: ":", maxSplits: 1).map(String.init)
        switch parts[0] {
        case "sign_in_started": return .signInStarted
        case "callback_received": return .callbackReceived
        case "tokens_received": return .tokensReceived(session)
        case "sign_in_abandoned": return .signInAbandoned(session)
        case "refresh_started": return .refreshStarted
        case "refreshed": return .refreshed(session)
        case "step_up_demanded": return .stepUpDemanded(acr: parts[1])
        case "sign_out_started": return .signOutStarted
        case "signed_out": return .signedOut
        case "storage_locked": return .storageLocked
        case "restored": return .restored(parts[1] == "session" ? session : nil)
        default: return .failed(RelaisKitError(RelaisKitErrorCode(parts[1]), "vector"))
        }
    }

    @Test(.tags(.fast)) func theTransitionTable() throws {
        let rows = try #require(try Self.vector("transitions")["transitions"] as? [[String: String]])
        #expect(rows.count > 25)
        for row in rows {
            let from = Self.state(row["from"]!), event = Self.event(row["event"]!), expected = Self.state(row["to"]!)
            let next = from.next(event)
            #expect(next.code == expected.code && next.session == expected.session, "\(row["from"]!) + \(row["event"]!) gave \(next.code), not \(row["to"]!)")
        }
    }

    @Test(.tags(.fast)) func theInstanceKeyThumbprintAndPKCE() throws {
        let vectors = try Self.vector("wire")
        let instance = try #require(vectors["instance_key"] as? [String: String])
        let key = try SoftwareProofKey(persistentRepresentation: try #require(Base64URL.decode(instance["d"]!)))
        #expect(key.publicJWK == instance["jwk"])
        #expect(key.thumbprint == instance["jkt"])
        let pkce = try #require(vectors["pkce"] as? [String: String])
        #expect(CompactJWT.sha256(pkce["code_verifier"]!) == pkce["code_challenge"])
    }

    static func decoded(_ jwt: String, part: Int) throws -> [String: Any] {
        let segment = try #require(Base64URL.decode(String(jwt.split(separator: ".")[part])))
        return try #require(try JSONSerialization.jsonObject(with: segment) as? [String: Any])
    }

    /// The proof the client makes for a vector's request has exactly the vector's header and
    /// claims (plus a fresh `jti`), and its signature verifies with the instance key.
    @Test(.tags(.fast), arguments: ["dpop_token_request", "dpop_resource_request"])
    func dpopProofs(name: String) async throws {
        let vectors = try Self.vector("wire")
        let instance = try #require(vectors["instance_key"] as? [String: String])
        let key = try SoftwareProofKey(persistentRepresentation: try #require(Base64URL.decode(instance["d"]!)))
        let vector = try #require(vectors[name] as? [String: Any])
        let clock = FixedClock(now: Date(timeIntervalSince1970: TimeInterval(vector["iat"] as! Int)))
        let client = RelaisClient(
            configuration: .init(issuer: "https://relais.example.fr", clientID: "fr.example.app"),
            platform: RelaisPlatform(storage: MemoryStorage(), web: LoopbackWebAuthenticator { _ in }, clock: clock)
        )
        let url = try #require(URL(string: vector["url"] as! String))
        if let nonce = vector["nonce"] as? String { await client.setNonce(nonce, for: url) }
        let proof = try await client.proof(method: vector["method"] as! String, url: url, accessToken: vector["access_token"] as? String, key: key)
        let header = try Self.decoded(proof, part: 0)
        var claims = try Self.decoded(proof, part: 1)
        #expect(NSDictionary(dictionary: header).isEqual(to: vector["header"] as! [String: Any]))
        let jti = try #require(claims.removeValue(forKey: "jti") as? String)
        #expect(jti.count >= 16)
        #expect(NSDictionary(dictionary: claims).isEqual(to: vector["claims"] as! [String: Any]))
        let parts = proof.split(separator: ".")
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(Base64URL.decode(String(parts[2]))))
        let publicKey = try P256.Signing.PublicKey(rawRepresentation: key.publicKeyRaw)
        #expect(publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
    }

    @Test(.tags(.fast)) func attestationPoPAndAppAttestClientData() async throws {
        let vectors = try Self.vector("wire")
        let instance = try #require(vectors["instance_key"] as? [String: String])
        let key = try SoftwareProofKey(persistentRepresentation: try #require(Base64URL.decode(instance["d"]!)))
        let vector = try #require(vectors["attestation_pop"] as? [String: Any])
        let client = RelaisClient(
            configuration: .init(issuer: vector["issuer"] as! String, clientID: vector["client_id"] as! String),
            platform: RelaisPlatform(
                storage: MemoryStorage(), web: LoopbackWebAuthenticator { _ in },
                clock: FixedClock(now: Date(timeIntervalSince1970: TimeInterval(vector["iat"] as! Int)))
            )
        )
        let pop = try await client.attestationPoP(key: key)
        #expect(NSDictionary(dictionary: try Self.decoded(pop, part: 0)).isEqual(to: vector["header"] as! [String: Any]))
        var claims = try Self.decoded(pop, part: 1)
        #expect((claims.removeValue(forKey: "jti") as? String)?.isEmpty == false)
        #expect(NSDictionary(dictionary: claims).isEqual(to: vector["claims"] as! [String: Any]))

        let data = try #require(vectors["attestation_client_data"] as? [String: String])
        let clientData = RelaisClient.appAttestClientData(challenge: data["challenge"]!, jkt: key.thumbprint)
        #expect(data["jkt"] == key.thumbprint)
        #expect(String(decoding: clientData, as: UTF8.self) == data["client_data"])
        #expect(Base64URL.encode(clientData) == data["client_data_b64url"])
        #expect(Data(SHA256.hash(data: clientData)).base64EncodedString() == data["client_data_hash_b64"])
    }

    @Test func challengesAndRefusals() throws {
        let parameters = RelayFailure.challengeParameters(
            #"DPoP algs="ES256 RS256", error="insufficient_user_authentication", error_description="the sign-in level is below eidas2", acr_values="eidas2", max_age=600"#)
        #expect(parameters["error"] == "insufficient_user_authentication" && parameters["acr_values"] == "eidas2" && parameters["max_age"] == "600")
        #expect(parameters["algs"] == "ES256 RS256")
        func refused(_ reason: String?) -> RelaisKitError {
            var error = RelaisKitError(.relay("invalid_grant"), "any text: the reason decides")
            error.relayReason = reason
            return error
        }
        #expect(RelaisClient.cause(ofInvalidGrant: refused("refresh_token_reused")).code == .refreshTokenReused)
        #expect(RelaisClient.cause(ofInvalidGrant: refused("dpop_key_mismatch")).code == .keyLost)
        #expect(RelaisClient.cause(ofInvalidGrant: refused("session_ended")).code == .sessionEnded)
        #expect(RelaisClient.cause(ofInvalidGrant: refused("approver_ended")).code == .sessionEnded)
        #expect(RelaisClient.cause(ofInvalidGrant: refused(nil)).code == .sessionEnded)
        let cancelled = #expect(throws: RelaisKitError.self) {
            try RelaisClient.code(from: URL(string: "http://127.0.0.1:5/cb?error=access_denied&state=s1&iss=https%3A%2F%2Fr")!, state: "s1", issuer: "https://r")
        }
        #expect(cancelled?.code == .cancelled)
        // RFC 9207 §2.4: Relais always names itself, so a redirect without iss, or with another, is refused.
        for query in ["code=c&state=s1", "code=c&state=s1&iss=https%3A%2F%2Fother", "error=access_denied&state=s1"] {
            let unnamed = #expect(throws: RelaisKitError.self, "\(query)") {
                try RelaisClient.code(from: URL(string: "http://127.0.0.1:5/cb?" + query)!, state: "s1", issuer: "https://r")
            }
            #expect(unnamed?.code == .invalidCallback, "\(query)")
        }
        let foreign = #expect(throws: RelaisKitError.self) {
            try RelaisClient.code(from: URL(string: "http://127.0.0.1:5/cb?code=c&state=s2")!, state: "s1", issuer: "https://r")
        }
        #expect(foreign?.code == .invalidCallback)
        #expect(try RelaisClient.code(from: URL(string: "http://127.0.0.1:5/cb?code=c1&state=s1&iss=https%3A%2F%2Fr")!, state: "s1", issuer: "https://r") == "c1")
    }

    @Test(.tags(.fast)) func fileStorageIsPrivateAndAtomic() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relaiskit-\(UUID().uuidString)")
        let storage = try FileStorage(directory: directory)
        #expect(try storage.read("app.session") == nil)
        try storage.write("app.session", Data("one".utf8))
        try storage.write("app.session", Data("two".utf8))
        #expect(try storage.read("app.session") == Data("two".utf8))
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("app.session").path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["app.session"])
        try storage.delete("app.session")
        #expect(try storage.read("app.session") == nil)
    }
}

struct FixedClock: RelaisKitClock {
    let now: Date
}
