import Foundation
import Hummingbird
import NIOCore
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Synchronization
import Testing

extension DevProviderProcessTests {
    /// FranceConnect v1 and FranceConnect+ modes, and `private_key_jwt` client authentication.
    @Suite struct DevProviderModesTests {
        static func jwks(_ keys: [JWK]) -> String {
            String(decoding: JWKSet(keys: keys).publicJSON(), as: UTF8.self)
        }

        @Test func v1SignsWithTheClientSecretAndAnswersJSON() async throws {
            let client = try await ProviderClient.launch(mode: "v1")
            #expect(try await client.get(client.provider.baseURL + "/api/v2/.well-known/openid-configuration").status == 404)
            #expect(try await client.get(client.issuer + "/jwks").status == 404)
            let callback = try await client.signIn()
            #expect(callback["iss"] == nil)  // v1 callbacks carry no iss
            let tokens = try await client.tokens()
            let jws = try JWS.parse(try #require(tokens["id_token"]?.stringValue))
            #expect(jws.algorithm == .hs256)
            try jws.verify(with: JWK(symmetric: Array(ProviderClient.secrets["app"]!.utf8)))
            var policy = ClaimsPolicy(issuer: client.issuer, audience: "app", now: { [clock = client.clock] in clock.now })
            policy.nonce = ProviderClient.nonce
            #expect(try policy.validate(jws).acr == "eidas1")
            let userinfo = try await client.userinfo(try #require(tokens["access_token"]?.stringValue))
            #expect(userinfo.header("content-type") == "application/json")
            let claims = try #require(JSONValue.object(from: userinfo.body))
            #expect(claims["family_name"] == .string("DUBOIS"))
            #expect(claims["iss"] == nil)
            let logout = try await client.get(
                FormParameters.url(
                    client.issuer + "/logout",
                    adding: [
                        ("id_token_hint", try #require(tokens["id_token"]?.stringValue)), ("state", "s1"), ("post_logout_redirect_uri", "http://127.0.0.1:9/logged-out"),
                    ])
            )
            #expect(logout.status == 303 && logout.header("location") == "http://127.0.0.1:9/logged-out?state=s1")
        }

        @Test func franceConnectPlusEncryptsIdTokenAndUserinfoToTheClient() async throws {
            let rsa = try TestKeys.rsa(keyID: "app-enc", use: "enc", pinAlgorithm: false)
            let ec = try JWK.generate(for: .es256, keyID: "ec-enc", use: "enc", pinAlgorithm: false)
            let clients = """
                  app:
                    secret: app-secret-0123456789-0123456789-abcdef
                    redirect_uris: [http://127.0.0.1:9/callback]
                    jwks: '\(Self.jwks([rsa]))'
                    encryption_alg: RSA-OAEP-256
                  other:
                    secret: other-secret-0123456789-0123456789-abcd
                    redirect_uris: [http://127.0.0.1:9/other]
                    jwks: '\(Self.jwks([ec]))'
                    encryption_alg: ECDH-ES
                """
            let client = try await ProviderClient.launch(mode: "fcplus", clients: clients)
            let document = try #require(JSONValue.object(from: try await client.get(client.issuer + "/.well-known/openid-configuration").body))
            #expect(document["acr_values_supported"] == .array([.string("eidas2"), .string("eidas3")]))
            #expect(document["id_token_encryption_enc_values_supported"] == .array([.string("A256GCM")]))

            // eidas1 is not FranceConnect+'s; the lowest of several requested levels is performed.
            let refused = try await client.authorize(client.authorizeParameters(acr: "eidas1"))
            #expect(try ProviderClient.query(of: try #require(refused.header("location")))["error"] == "invalid_acr")

            for (name, key, algorithm) in [("app", rsa, "RSA-OAEP-256"), ("other", ec, "ECDH-ES")] {
                let callback = try await client.signIn(as: "pierre", client.authorizeParameters(client: name, acr: "eidas3 eidas2"), client: name)
                let code = try #require(callback["code"])
                let tokens = try #require(JSONValue.object(from: try await client.exchange(code: code, client: name).body))
                let encrypted = try JWE.parse(try #require(tokens["id_token"]?.stringValue))
                #expect(encrypted.keyAlgorithm.rawValue == algorithm)
                #expect(encrypted.contentAlgorithm == .a256GCM)
                let decrypted = try encrypted.decrypt(with: JWKSet(keys: [key]))
                #expect(decrypted.isNestedJWT)
                let inner = try JWS.parse(decrypted.plaintextString)
                #expect(inner.algorithm == .es256)
                let claims = try await client.verify(decrypted.plaintextString, audience: name)
                #expect(claims.acr == "eidas2")

                let userinfo = try await client.userinfo(try #require(tokens["access_token"]?.stringValue))
                #expect(userinfo.header("content-type") == "application/jwt")
                let userinfoJWS = try JWE.parse(userinfo.bodyText).decrypt(with: JWKSet(keys: [key])).plaintextString
                let userClaims = try await client.verify(userinfoJWS, audience: name, nonce: nil)
                #expect(userClaims.subject == claims.subject)
                #expect(userClaims.string("given_name") == "Pierre")
            }
        }

        @Test func franceConnectPlusFetchesTheClientKeysFromItsJwksURI() async throws {
            let rsa = try TestKeys.rsa(keyID: "remote-enc", use: "enc", pinAlgorithm: false)
            let router = Router()
            let body = Self.jwks([rsa])
            router.get("/jwks") { _, _ in body }
            try await LoopbackHTTPServer.with(router: router) { server in
                let clients = """
                      app:
                        secret: app-secret-0123456789-0123456789-abcdef
                        redirect_uris: [http://127.0.0.1:9/callback]
                        jwks_uri: \(server.baseURL)/jwks
                    """
                let client = try await ProviderClient.launch(mode: "fcplus", clients: clients)
                let tokens = try await client.tokens(client: "app", scope: "openid given_name", acr: "eidas2")
                let decrypted = try JWE.parse(try #require(tokens["id_token"]?.stringValue)).decrypt(with: JWKSet(keys: [rsa]))
                #expect(decrypted.key.keyID == "remote-enc")
            }
        }

        @Test func withoutTheClientKeyFranceConnectPlusAnswersAnErrorAndKeepsTheCode() async throws {
            let rsa = try TestKeys.rsa(keyID: "late-enc", use: "enc", pinAlgorithm: false)
            let available = Atomic<Bool>(false)
            let router = Router()
            let body = Self.jwks([rsa])
            router.get("/jwks") { _, _ in
                available.load(ordering: .relaxed) ? Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: body))) : Response(status: .serviceUnavailable)
            }
            try await LoopbackHTTPServer.with(router: router) { server in
                let clients = """
                      app:
                        secret: app-secret-0123456789-0123456789-abcdef
                        redirect_uris: [http://127.0.0.1:9/callback]
                        jwks_uri: \(server.baseURL)/jwks
                    """
                let client = try await ProviderClient.launch(mode: "fcplus", clients: clients)
                let code = try #require(try await client.signIn(as: "angela", client.authorizeParameters(acr: "eidas2"))["code"])
                let refused = try await client.exchange(code: code)
                #expect(refused.status == 500)
                #expect(JSONValue.object(from: refused.body)?["error"] == .string("server_error"))
                available.store(true, ordering: .relaxed)
                // A failed first fetch is tried again once its 5 s interval has passed, not at once.
                client.clock.advance(by: .seconds(6))
                let response = try await client.exchange(code: code)
                #expect(response.status == 200)
                let token = try #require(JSONValue.object(from: response.body)?["id_token"]?.stringValue)
                #expect(try JWE.parse(token).decrypt(with: JWKSet(keys: [rsa])).isNestedJWT)
            }
        }

        @Test func privateKeyJWTAuthenticatesWithASignedAssertionOnce() async throws {
            let signing = try JWK.generate(for: .es256, keyID: "client-sig")
            let rsaSigning = try TestKeys.rsa(keyID: "client-rsa")
            let stranger = try JWK.generate(for: .es256, keyID: "client-sig")
            let hmac = try JWK.generate(for: .hs256, keyID: "client-sig")
            let clients = """
                  app:
                    token_endpoint_auth_method: private_key_jwt
                    redirect_uris: [http://127.0.0.1:9/callback]
                    jwks: '\(Self.jwks([signing, rsaSigning]))'
                """
            let client = try await ProviderClient.launch(clients: clients)
            let tokenURL = client.issuer + "/token"
            func assertion(_ key: JWK, audience: String = tokenURL, jti: String = SecureRandom.token(bits: 96), issuer: String = "app", lifetime: Double = 60) throws -> String {
                let now = client.clock.now.rounded()
                let claims: [String: JSONValue] = [
                    "iss": .string(issuer), "sub": .string(issuer), "aud": .string(audience), "jti": .string(jti),
                    "iat": .number(now), "exp": .number(now + lifetime),
                ]
                let algorithm: JWSAlgorithm = key.keyType == .rsa ? .rs256 : key.keyType == .oct ? .hs256 : .es256
                return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: key, algorithm: algorithm)
            }
            func exchange(_ assertion: String, type: String = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") async throws -> (Int, String?) {
                let code = try #require(try await client.signIn()["code"])
                let response = try await client.post(
                    tokenURL,
                    [
                        ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "http://127.0.0.1:9/callback"),
                        ("client_assertion_type", type), ("client_assertion", assertion),
                    ])
                return (response.status, JSONValue.object(from: response.body)?["error"]?.stringValue)
            }
            let good = try assertion(signing, jti: "jti-once")
            #expect(try await exchange(good) == (200, nil))
            #expect(try await exchange(good) == (401, "invalid_client"))  // the jti was used
            #expect(try await exchange(try assertion(signing, audience: client.issuer)) == (200, nil))
            #expect(try await exchange(try assertion(rsaSigning)) == (200, nil))
            #expect(try await exchange(try assertion(stranger)) == (401, "invalid_client"))
            #expect(try await exchange(try assertion(hmac)) == (401, "invalid_client"))
            #expect(try await exchange(try assertion(signing, audience: "https://elsewhere.example/token")) == (401, "invalid_client"))
            #expect(try await exchange(try assertion(signing, lifetime: -120)) == (401, "invalid_client"))
            #expect(try await exchange(try assertion(signing, lifetime: 3600)) == (401, "invalid_client"))
            #expect(try await exchange(try assertion(signing), type: "urn:other") == (401, "invalid_client"))
            // A secret is not accepted from a private_key_jwt client.
            let code = try #require(try await client.signIn()["code"])
            #expect(try await client.exchange(code: code, secret: "anything").status == 401)
            // The assertion's exp is checked on the provider's clock, not the machine's.
            let minted = try assertion(signing)
            client.clock.advance(by: .seconds(120))
            #expect(try await exchange(minted) == (401, "invalid_client"))
        }
    }
}
