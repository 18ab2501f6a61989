// swift-format-ignore-file
// (The snippets below are shown verbatim in RelaisJOSE.docc; the formatter would rewrap them.)
import Hummingbird
import RelaisCrypto
import RelaisTestSupport
import Synchronization
import Testing

// The code of the article "Verify Relais access tokens in your API"
// (Sources/RelaisJOSE/RelaisJOSE.docc/VerifyingRelaisAccessTokens.md), compiled and run here.
// The marked regions below are the article's Swift blocks, in order:
// `theArticleShowsTheCompiledCode` fails when the two differ.

// snippet: fetcher
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RelaisJOSE

/// Downloads a JWK Set with URLSession, for a JWKSCache.
struct URLSessionKeySetFetcher: JWKSFetcher {
    func fetchKeySet(from url: String) async throws -> [UInt8] {
        guard let address = URL(string: url) else { throw URLError(.badURL) }
        let request = URLRequest(url: address, timeoutInterval: 5)
        let (body, response) = try await URLSession.shared.data(for: request)
        guard let status = (response as? HTTPURLResponse)?.statusCode, (200..<300).contains(status) else {
            // Throwing keeps the cache on its last good key set.
            throw URLError(.badServerResponse)
        }
        return Array(body)
    }
}
// end-snippet

// snippet: verifier
/// The caller of a request, once its access token is accepted.
struct Caller: Sendable, Equatable {
    var subject: String
    var clientID: String
    var scopes: Set<String>
    var acr: String?
}

/// Verifies Relais access tokens offline. Create one at startup and share it.
struct AccessTokenVerifier: Sendable {
    let keys: JWKSCache
    let policy: ClaimsPolicy

    /// - Parameters:
    ///   - issuer: Relais' public address, exactly as its tokens carry it in `iss`.
    ///   - audience: This API's own identifier, one of the app's `audiences` in Relais' configuration.
    ///   - now: The time `exp`, `nbf` and `iat` are checked against, in seconds since 1970: the
    ///     wall clock in production (`{ Date().timeIntervalSince1970 }`), a time of their own in tests.
    init(issuer: String, audience: String, fetcher: any JWKSFetcher, now: @escaping @Sendable () -> Double) {
        keys = JWKSCache(url: issuer + "/jwks.json", fetcher: fetcher)
        var policy = ClaimsPolicy(issuer: issuer, audience: audience, now: now)
        policy.expectedType = "at+jwt"         // an access token, never an id_token (RFC 9068)
        policy.leeway = .seconds(30)           // clock skew tolerated on exp, nbf and iat
        policy.requiredClaims = ["sub", "client_id", "sid", "scope"]
        policy.checkAuthorizedParty = false    // access tokens name their client in client_id
        self.policy = policy
    }

    func verify(_ token: String) async throws(JOSEError) -> Caller {
        let jws = try JWS.parse(token)                // shape, size, alg (never none)
        try await keys.verify(jws)                    // the key named by kid, then the signature
        let claims = try policy.validate(jws)         // typ, iss, aud, exp, required claims
        guard let subject = claims.subject, let clientID = claims.string("client_id"),
            let scope = claims.string("scope")
        else {
            throw .claimRejected(check: .required, reason: "sub, client_id and scope must be strings")
        }
        let scopes = Set(scope.split(separator: " ").map(String.init))
        return Caller(subject: subject, clientID: clientID, scopes: scopes, acr: claims.acr)
    }
}
// end-snippet

// snippet: authorize
/// What to do with a request: serve the caller, or answer the status with a
/// `WWW-Authenticate` header.
enum AccessDecision: Equatable {
    case allowed(Caller)
    case refused(status: Int, wwwAuthenticate: String)
}

/// The `acr` levels of FranceConnect, weakest first.
let acrLevels = ["eidas1", "eidas2", "eidas3"]

func authorize(
    authorization: String?, scope: String, minimumACR: String? = nil, verifier: AccessTokenVerifier
) async -> AccessDecision {
    let challenge = #"Bearer realm="my-api""#
    guard let authorization, authorization.lowercased().hasPrefix("bearer ") else {
        return .refused(status: 401, wwwAuthenticate: challenge)  // no token: no error code
    }
    let caller: Caller
    do {
        caller = try await verifier.verify(String(authorization.dropFirst("bearer ".count)))
    } catch .keySetUnavailable {
        return .refused(status: 503, wwwAuthenticate: challenge)  // Relais unreachable: retry later
    } catch {
        // Log error.description; tell the client only that the token is not valid.
        return .refused(status: 401, wwwAuthenticate: challenge + #", error="invalid_token""#)
    }
    guard caller.scopes.contains(scope) else {
        return .refused(status: 403, wwwAuthenticate: challenge + #", error="insufficient_scope", scope="\#(scope)""#)
    }
    if let minimumACR {
        let level = caller.acr.flatMap { acrLevels.firstIndex(of: $0) } ?? -1
        guard let required = acrLevels.firstIndex(of: minimumACR), level >= required else {
            let stepUp = #", error="insufficient_user_authentication", acr_values="\#(minimumACR)""#
            return .refused(status: 401, wwwAuthenticate: challenge + stepUp)  // RFC 9470
        }
    }
    return .allowed(caller)
}
// end-snippet

// snippet: dpop
/// Whether a DPoP-bound token (its claims carry `cnf.jkt`) comes with a proof by its key
/// (RFC 9449 §7): signed by that key, for this request, and never used before.
func hasValidProof(
    dpop: String?, method: String, url: String, accessToken: String, boundTo jkt: String, now: Double,
    alreadyUsed: (String) async -> Bool  // records the jti; true if it was seen (a shared cache)
) async -> Bool {
    guard let dpop else { return false }  // a bound token without a proof is refused
    let proof: DPoPProof
    do {
        let verifier = DPoPProofVerifier(now: { now })  // seconds since 1970
        proof = try verifier.verify(dpop, method: method, url: url, accessToken: accessToken)
    } catch {
        return false  // log error.code: dpop_htu, dpop_ath, dpop_iat, ...
    }
    guard proof.thumbprint == jkt else { return false }  // another key's proof
    return await !alreadyUsed(proof.tokenID)
}
// end-snippet

@Suite struct DocumentationExampleTests {
    /// The time an API in production would pass: the tokens here are minted with the machine's.
    static let wallClock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
    static let issuer = "https://relais.example.fr"
    static let audience = "https://api.example.fr"
    static let signingKey = try! JWK.generate(for: .es256, keyID: "relais-2026")
    static let invalidToken = #"Bearer realm="my-api", error="invalid_token""#

    /// Serves a JWK Set from memory, as Relais' /jwks.json would, and records what was asked.
    final class InMemoryFetcher: JWKSFetcher {
        let document: [UInt8]?
        private let asked = Mutex<[String]>([])

        init(serving keys: [JWK]?) { document = keys.map { JWKSet(keys: $0).publicJSON() } }

        var urls: [String] { asked.withLock { $0 } }

        func fetchKeySet(from url: String) async throws -> [UInt8] {
            asked.withLock { $0.append(url) }
            guard let document else { throw URLError(.cannotConnectToHost) }
            return document
        }
    }

    /// An access token shaped like the ones Relais mints; `change` alters the claims.
    static func accessToken(
        signedBy key: JWK = signingKey, typ: String = "at+jwt", _ change: (inout [String: JSONValue]) -> Void = { _ in }
    ) throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer), "sub": .string("user-42"), "aud": .string(audience), "client_id": .string("web-app"),
            "scope": .string("openid profile orders:read"), "sid": .string("session-1"), "jti": .string("token-1"),
            "iat": .number(now), "exp": .number(now + 300), "idp": .string("franceconnect"), "acr": .string("eidas1"),
        ]
        change(&claims)
        return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: key, algorithm: .es256, extraHeader: ["typ": .string(typ)])
    }

    private func decision(_ token: String, scope: String = "orders:read", minimumACR: String? = nil, keys: [JWK]? = [signingKey]) async -> AccessDecision {
        let verifier = AccessTokenVerifier(issuer: Self.issuer, audience: Self.audience, fetcher: InMemoryFetcher(serving: keys), now: Self.wallClock)
        return await authorize(authorization: "Bearer " + token, scope: scope, minimumACR: minimumACR, verifier: verifier)
    }

    /// The JOSE code the example verifier refuses `token` with; `now` pins the verifier's clock.
    private func refusal(_ token: String, now: Double? = nil) async -> String? {
        let fetcher = InMemoryFetcher(serving: [Self.signingKey])
        let verifier = AccessTokenVerifier(issuer: Self.issuer, audience: Self.audience, fetcher: fetcher, now: { now ?? Self.wallClock() })
        do {
            _ = try await verifier.verify(token)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func aGoodTokenIsAcceptedWithKeysFromTheIssuersJWKS() async throws {
        let fetcher = InMemoryFetcher(serving: [Self.signingKey])
        let verifier = AccessTokenVerifier(issuer: Self.issuer, audience: Self.audience, fetcher: fetcher, now: Self.wallClock)
        let token = try Self.accessToken()
        let expected = Caller(subject: "user-42", clientID: "web-app", scopes: ["openid", "profile", "orders:read"], acr: "eidas1")
        #expect(try await verifier.verify(token) == expected)
        #expect(await authorize(authorization: "Bearer " + token, scope: "orders:read", verifier: verifier) == .allowed(expected))
        #expect(await authorize(authorization: "bearer " + token, scope: "orders:read", verifier: verifier) == .allowed(expected))
        #expect(fetcher.urls == ["https://relais.example.fr/jwks.json"])  // once, then from memory
    }

    @Test func aTokenForSeveralAudiencesIncludingOursIsAccepted() async throws {
        let token = try Self.accessToken { $0["aud"] = .array([.string("https://other.example.fr"), .string(Self.audience)]) }
        #expect(await refusal(token) == nil)
    }

    @Test func eachForgeryOrMisuseIsRefusedWithItsCode() async throws {
        let otherKey = try JWK.generate(for: .es256, keyID: "relais-2026")  // same kid, not Relais' key
        let refused: [(String, String)] = [
            (try Self.accessToken { $0["aud"] = .string("https://other.example.fr") }, "jwt_aud"),
            (try Self.accessToken { $0["aud"] = nil }, "jwt_aud"),
            (try Self.accessToken { $0["iss"] = .string("https://evil.example.fr") }, "jwt_iss"),
            (try Self.accessToken { $0["exp"] = .number(Date().timeIntervalSince1970 - 120) }, "jwt_exp"),
            (try Self.accessToken(typ: "JWT"), "jwt_typ"),
            (try Self.accessToken(signedBy: otherKey), "jose_invalid_signature"),
            (try Self.accessToken { $0["client_id"] = nil }, "jwt_required"),
            (try Self.accessToken { $0["sub"] = .number(42) }, "jwt_required"),
        ]
        for (token, code) in refused {
            #expect(await refusal(token) == code)
            #expect(await decision(token) == .refused(status: 401, wwwAuthenticate: Self.invalidToken))
        }
    }

    @Test func anExpiredTokenWithinTheLeewayIsStillAccepted() async throws {
        let now = Date().timeIntervalSince1970.rounded(.down)
        let token = try Self.accessToken { $0["exp"] = .number(now - 10) }
        #expect(await refusal(token, now: now) == nil)
        #expect(await refusal(token, now: now + 21) == "jwt_exp")  // 31 s past exp: beyond the 30 s leeway
    }

    @Test func scopeAndAcrDecideWhatAnAcceptedCallerMayDo() async throws {
        let token = try Self.accessToken()
        #expect(await decision(token, scope: "orders:write")
            == .refused(status: 403, wwwAuthenticate: #"Bearer realm="my-api", error="insufficient_scope", scope="orders:write""#))
        #expect(await decision(token, minimumACR: "eidas2")
            == .refused(status: 401, wwwAuthenticate: #"Bearer realm="my-api", error="insufficient_user_authentication", acr_values="eidas2""#))
        guard case .allowed = await decision(try Self.accessToken { $0["acr"] = .string("eidas3") }, minimumACR: "eidas2") else {
            Issue.record("eidas3 satisfies eidas2")
            return
        }
    }

    @Test func noTokenAndUnreachableKeysAreAnsweredWithoutBlamingTheToken() async throws {
        let verifier = AccessTokenVerifier(issuer: Self.issuer, audience: Self.audience, fetcher: InMemoryFetcher(serving: [Self.signingKey]), now: Self.wallClock)
        #expect(await authorize(authorization: nil, scope: "orders:read", verifier: verifier) == .refused(status: 401, wwwAuthenticate: #"Bearer realm="my-api""#))
        #expect(await authorize(authorization: "Basic dTpw", scope: "orders:read", verifier: verifier) == .refused(status: 401, wwwAuthenticate: #"Bearer realm="my-api""#))
        #expect(await decision(try Self.accessToken(), keys: nil) == .refused(status: 503, wwwAuthenticate: #"Bearer realm="my-api""#))
    }

    @Test func theURLSessionFetcherDownloadsTheSetAndRefusesAnErrorStatus() async throws {
        let endpoint = KeySetEndpoint(keys: [Self.signingKey])
        try await LoopbackHTTPServer.with(router: endpoint.router()) { server in
            let body = try await URLSessionKeySetFetcher().fetchKeySet(from: server.baseURL + "/jwks")
            #expect(try JWKSet(json: body).keys.map(\.keyID) == ["relais-2026"])
            endpoint.fail(with: 500)
            await #expect(throws: URLError.self) { try await URLSessionKeySetFetcher().fetchKeySet(from: server.baseURL + "/jwks") }
        }
    }

    @Test func aBoundTokenIsGoodOnlyWithAFreshProofByItsKey() async throws {
        let appKey = try JWK.generate(for: .es256), otherKey = try JWK.generate(for: .es256)
        let token = try Self.accessToken { $0["cnf"] = .object(["jkt": .string(appKey.thumbprint())]) }
        let url = "https://api.example.fr/orders"
        func proof(_ key: JWK, htu: String = url, jti: String = UUID().uuidString, ath: String? = nil) throws -> String {
            let hash = ath ?? Base64URL.encode(SHA256.hash(Array(token.utf8)))
            let claims: [String: JSONValue] = [
                "jti": .string(jti), "htm": .string("GET"), "htu": .string(htu), "iat": .number(Date().timeIntervalSince1970.rounded(.down)), "ath": .string(hash),
            ]
            return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: key, algorithm: .es256,
                extraHeader: ["typ": .string("dpop+jwt"), "jwk": .object(key.publicJSON() ?? [:])])
        }
        let seen = Mutex<Set<String>>([])
        let alreadyUsed: (String) async -> Bool = { jti in seen.withLock { !$0.insert(jti).inserted } }
        func check(_ dpop: String?, url checked: String = url) async throws -> Bool {
            await hasValidProof(dpop: dpop, method: "GET", url: checked, accessToken: token, boundTo: appKey.thumbprint(), now: Self.wallClock(), alreadyUsed: alreadyUsed)
        }
        let good = try proof(appKey, htu: url + "?page=2")  // query and fragment are not compared
        #expect(try await check(good))
        #expect(try await check(good) == false)  // replayed
        #expect(try await check(nil) == false)
        #expect(try await check(try proof(otherKey)) == false)
        #expect(try await check(try proof(appKey, htu: "https://api.example.fr/admin")) == false)
        #expect(try await check(try proof(appKey, ath: "not-this-token")) == false)
        #expect(try await check(try proof(appKey)))
    }

    @Test func theArticleShowsTheCompiledCode() throws {
        let tests = URL(fileURLWithPath: #filePath)
        let root = tests.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let article = root.appendingPathComponent("Sources/RelaisJOSE/RelaisJOSE.docc/VerifyingRelaisAccessTokens.md")
        let blocks = DocumentationSnippets.swiftBlocks(in: try String(contentsOf: article, encoding: .utf8))
        let snippets = DocumentationSnippets.snippets(in: try String(contentsOf: tests, encoding: .utf8))
        #expect(snippets.count == 4)
        #expect(blocks.count == snippets.count, "the article has \(blocks.count) swift blocks, this file \(snippets.count) snippets")
        for (index, (block, snippet)) in zip(blocks, snippets).enumerated() {
            #expect(block == snippet.text, "swift block \(index + 1) of the article differs from snippet '\(snippet.name)'")
        }
    }
}
