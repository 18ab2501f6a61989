import RelaisCrypto
public import RelaisHTTPClient
public import RelaisJOSE
import Synchronization

/// Standard Play Integrity requests can only be decoded by Google: `decodeIntegrityToken`, called
/// with an OAuth token that a Google Cloud service account obtains by signing a JWT (RFC 7523).
/// Both calls go through libcurl with a timeout; the access token is reused until shortly before
/// it expires.
public final class PlayIntegrityGoogleDecoder: PlayIntegrityDecoder {
    static let scope = "https://www.googleapis.com/auth/playintegrity"

    let clientEmail: String
    let signingKey: JWK
    let tokenURI: String
    let apiBaseURL: String
    let http: HTTPClient
    let timeout: Duration
    let now: @Sendable () -> Double
    private let cached = Mutex<(token: String, expiresAt: Double)?>(nil)

    /// - Parameters:
    ///   - serviceAccount: the service account's JSON key file (`client_email`, `private_key`, `token_uri`).
    ///   - apiBaseURL: Google's Play Integrity API; tests point it at a local stand-in.
    public init(
        serviceAccount: [UInt8], http: HTTPClient, apiBaseURL: String = "https://playintegrity.googleapis.com", timeout: Duration = .seconds(5),
        now: @escaping @Sendable () -> Double
    ) throws(AttestationError) {
        guard let account = JSONValue.object(from: serviceAccount), let email = account["client_email"]?.stringValue,
            let pem = account["private_key"]?.stringValue, let tokenURI = account["token_uri"]?.stringValue
        else { throw AttestationError(.playDecodeService, "the service account file lacks client_email, private_key or token_uri") }
        guard let key = try? JWK(pem: pem, keyID: account["private_key_id"]?.stringValue), key.isPrivate, key.keyType == .rsa else {
            throw AttestationError(.playDecodeService, "the service account's private_key is not an RSA private key")
        }
        clientEmail = email
        signingKey = key
        self.tokenURI = tokenURI
        self.apiBaseURL = apiBaseURL.hasSuffix("/") ? String(apiBaseURL.dropLast()) : apiBaseURL
        self.http = http
        self.timeout = timeout
        self.now = now
    }

    public func decode(_ token: String, packageName: String) async throws(AttestationError) -> [String: JSONValue] {
        let accessToken = try await self.accessToken()
        let body = JSONValue.object(["integrity_token": .string(token)]).serialized()
        let request = HTTPClientRequest(
            method: .post, url: "\(apiBaseURL)/v1/\(FormEncoding.escape(packageName)):decodeIntegrityToken",
            headers: [("Authorization", "Bearer \(accessToken)"), ("Content-Type", "application/json")], body: body, timeout: timeout,
            operation: "play-integrity decode"
        )
        let response = try await send(request, what: "decodeIntegrityToken")
        guard response.status == 200 else {
            if response.status == 401 { cached.withLock { $0 = nil } }
            throw AttestationError(.playDecodeService, "decodeIntegrityToken answered \(response.status)")
        }
        guard let payload = JSONValue.object(from: response.body)?["tokenPayloadExternal"]?.objectValue else {
            throw AttestationError(.playMalformed, "decodeIntegrityToken's answer holds no tokenPayloadExternal")
        }
        return payload
    }

    private func accessToken() async throws(AttestationError) -> String {
        let current = now()
        if let cached = cached.withLock({ $0 }), cached.expiresAt - 60 > current { return cached.token }
        let claims: JSONValue = .object([
            "iss": .string(clientEmail), "scope": .string(Self.scope), "aud": .string(tokenURI),
            "iat": .number(current.rounded(.down)), "exp": .number(current.rounded(.down) + 3600),
        ])
        let assertion: String
        do {
            assertion = try JWS.sign(payload: claims.serialized(), with: signingKey, algorithm: .rs256, extraHeader: ["typ": .string("JWT")])
        } catch {
            throw AttestationError(.playDecodeService, "the service account key cannot sign: \(error)")
        }
        var request = HTTPClientRequest.form(
            url: tokenURI, fields: [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion)]
        )
        request.timeout = timeout
        request.operation = "google oauth token"
        let response = try await send(request, what: "the service account token request")
        guard response.status == 200, let answer = JSONValue.object(from: response.body), let token = answer["access_token"]?.stringValue else {
            throw AttestationError(.playDecodeService, "the service account token request answered \(response.status)")
        }
        let lifetime = answer["expires_in"]?.numberValue ?? 3600
        cached.withLock { $0 = (token, current + lifetime) }
        return token
    }

    private func send(_ request: HTTPClientRequest, what: String) async throws(AttestationError) -> HTTPClientResponse {
        do { return try await http.send(request) } catch { throw AttestationError(.playDecodeService, "\(what) failed: \(error)") }
    }
}
