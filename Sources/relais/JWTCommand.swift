import ArgumentParser
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE

/// `relais jwt`: what an operator reaches for when a provider's token is rejected at 2 a.m.
struct JWTCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jwt",
        abstract: "Inspect and verify JWTs (id_tokens, signed userinfo, Relais tokens).",
        subcommands: [Decode.self, Verify.self]
    )

    struct Decode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a token's header and claims WITHOUT verifying anything."
        )

        @Argument(help: "The token, or - to read it from standard input (keeps it out of shell history).")
        var token: String

        func run() async throws {
            let compact = try CommandInput.inline(token, what: "token")
            let segments = compact.split(separator: ".", omittingEmptySubsequences: false)
            guard segments.count == 3 || segments.count == 5,
                let header = Base64URL.decode(String(segments[0])).flatMap(JSONValue.object(from:))
            else {
                printError("not a compact JWS or JWE")
                throw ExitCode(1)
            }
            var output: [String: JSONValue] = [
                "verified": .bool(false),
                "warning": .string("NOT VERIFIED: decoded only; do not trust these claims"),
                "header": .object(header),
            ]
            if segments.count == 5 {
                output["note"] = .string("JWE: the payload is encrypted; use 'relais jwt verify --decrypt-key'")
            } else if let payload = Base64URL.decode(String(segments[1])) {
                output["claims"] = JSONValue.object(from: payload).map(JSONValue.object) ?? .string(String(decoding: payload, as: UTF8.self))
            }
            print(String(decoding: JSONValue.object(output).serialized(pretty: true), as: UTF8.self))
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a token's signature and claims; print the verified claims (exit 0) or the failed check (exit 1)."
        )

        @Argument(help: "The token, or - to read it from standard input.")
        var token: String

        @Option(help: "Keys: a JWKS or JWK file, a PEM file, or an http(s) URL serving a JWKS.")
        var jwks: String?

        @Option(help: "A file holding a shared secret for HS256/384/512 (FranceConnect v1 id_tokens use the client secret).")
        var secretFile: String?

        @Option(help: "Expected issuer (exact).")
        var iss: String?

        @Option(
            help:
                "Expected audience: the client_id for an id_token, the API's identifier for a Relais access token. With several audiences, an id_token must also name it in azp (OpenID Connect Core 3.1.3.7); an access token (typ at+jwt, RFC 9068) need not."
        )
        var aud: String?

        @Option(help: "Expected nonce.")
        var nonce: String?

        @Option(help: "Minimum acr.")
        var acr: String?

        @Option(help: "Ordered acr levels, lowest first.")
        var acrOrder: String = "eidas1,eidas2,eidas3"

        @Option(help: "Our decryption key (JWK, JWKS or PEM) for a JWE, as FranceConnect+ sends; the nested JWT is then verified.")
        var decryptKey: String?

        @Option(help: "Clock skew tolerated, in seconds.")
        var leeway: Int = 30

        @Flag(help: "Skip the expiration check (to read an expired token's claims after verifying its signature).")
        var ignoreExpiration = false

        func validate() throws {
            if (jwks == nil) == (secretFile == nil) { throw ValidationError("give exactly one of --jwks or --secret-file") }
        }

        func run() async throws {
            var compact = try CommandInput.inline(token, what: "token")
            do {
                if compact.split(separator: ".", omittingEmptySubsequences: false).count == 5 {
                    guard let decryptKey else {
                        printError("this token is a JWE: give --decrypt-key")
                        throw ExitCode(2)
                    }
                    let jwe = try JWE.parse(compact)
                    let keys = try await loadKeys(decryptKey)
                    // A single key file (often a PEM, with no kid) is the key to use whatever the token's kid.
                    let decrypted = try keys.keys.count == 1 ? jwe.decrypt(with: keys.keys[0]) : jwe.decrypt(with: keys)
                    compact = decrypted.plaintextString
                }
                let jws = try JWS.parse(compact)
                let key: JWK
                if let secretFile {
                    key = JWK(symmetric: Array(try CommandInput.file(secretFile).trimmingTrailingNewlines().utf8))
                    try jws.verify(with: key)
                } else {
                    key = try jws.verify(with: try await loadKeys(jwks!))
                }
                var policy = ClaimsPolicy(issuer: iss, audience: aud, now: { SystemClock().now })
                // The azp rule is for id_tokens. An RFC 9068 access token (Relais' own, for several
                // audiences when an app lists them) names its client in client_id and has no azp:
                // its header's typ says which kind the token is.
                policy.checkAuthorizedParty = !Self.isAccessToken(jws.header)
                policy.nonce = nonce
                // As the relay: a nonce-checked id_token must say when it was issued.
                policy.requireIssuedAt = nonce != nil
                policy.minimumACR = acr
                policy.acrOrder = acrOrder.split(separator: ",").map(String.init)
                policy.leeway = .seconds(leeway)
                policy.requireExpiration = !ignoreExpiration
                if ignoreExpiration { policy.now = { 0 } }
                let claims = try policy.validate(jws)
                let output: [String: JSONValue] = [
                    "verified": .bool(true),
                    "algorithm": .string(jws.algorithm.rawValue),
                    "key": .string(key.keyID ?? key.thumbprint()),
                    "header": .object(jws.header),
                    "claims": .object(claims.claims),
                ]
                print(String(decoding: JSONValue.object(output).serialized(pretty: true), as: UTF8.self))
            } catch let error as JOSEError {
                printError("rejected: \(error)")
                throw ExitCode(1)
            }
        }

        /// RFC 9068 §2.1: `typ` is `at+jwt`, or `application/at+jwt` (media types are case-insensitive).
        static func isAccessToken(_ header: [String: JSONValue]) -> Bool {
            guard case .string(let type) = header["typ"] else { return false }
            let lowered = type.lowercased()
            return lowered == "at+jwt" || lowered == "application/at+jwt"
        }

        private func loadKeys(_ source: String) async throws -> JWKSet {
            let bytes: [UInt8]
            if source.hasPrefix("http://") || source.hasPrefix("https://") {
                let client = HTTPClient(configuration: .init(maxConcurrentRequests: 1))
                let response: HTTPClientResponse
                do {
                    response = try await client.send(.init(url: source, headers: [(name: "Accept", value: "application/json")]))
                    try await client.shutdown()
                } catch {
                    try? await client.shutdown()
                    printError("cannot fetch \(source): \(error)")
                    throw ExitCode(2)
                }
                guard response.status == 200 else {
                    printError("cannot fetch \(source): HTTP \(response.status)")
                    throw ExitCode(2)
                }
                bytes = response.body
            } else {
                bytes = Array(try CommandInput.file(source).utf8)
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if text.contains("-----BEGIN") { return JWKSet(keys: [try JWK(pem: text)]) }
            if let object = JSONValue.object(from: bytes), object["keys"] == nil { return JWKSet(keys: [try JWK(object: object)]) }
            return try JWKSet(json: bytes)
        }
    }
}

extension String {
    fileprivate func trimmingTrailingNewlines() -> String {
        var copy = self
        while copy.hasSuffix("\n") || copy.hasSuffix("\r") { copy.removeLast() }
        return copy
    }
}
