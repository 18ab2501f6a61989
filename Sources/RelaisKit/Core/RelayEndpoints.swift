import Foundation

/// Relais' endpoints, from its RFC 8414 metadata (`/.well-known/oauth-authorization-server`).
/// Relais-specific paths (session codes, sessions, device approval, attestation) hang off the issuer.
struct RelayEndpoints: Sendable {
    let issuer: String
    let authorization: URL
    let token: URL
    let userinfo: URL
    let revocation: URL
    let deviceAuthorization: URL?
    let challenge: URL?

    init(issuer: String, metadata: [String: KitJSON]) throws {
        func url(_ name: String) throws -> URL {
            guard let text = metadata.string(name), let url = URL(string: text) else {
                throw RelaisKitError(.invalidResponse, "the metadata has no \(name)")
            }
            return url
        }
        guard metadata.string("issuer") == issuer else {
            throw RelaisKitError(.invalidResponse, "the metadata names another issuer (RFC 8414 §3.3)")
        }
        self.issuer = issuer
        authorization = try url("authorization_endpoint")
        token = try url("token_endpoint")
        userinfo = try url("userinfo_endpoint")
        revocation = try url("revocation_endpoint")
        deviceAuthorization = try? url("device_authorization_endpoint")
        challenge = try? url("challenge_endpoint")
    }

    /// A Relais path under the issuer (`/session_code`, `/sessions`, `/attest/dev`…).
    func path(_ path: String) -> URL { URL(string: issuer + path)! }
}

/// An error answer of Relais: `{"error", "error_description"}` in JSON, or RFC 6750 / RFC 9449
/// parameters in `WWW-Authenticate` for resources.
struct RelayFailure: Sendable {
    var error: String
    var description: String
    var parameters: [String: String]
    /// Relais' `error_reason`, where one code covers several situations (docs/errors.md §7).
    var reason: String?

    init?(_ response: HTTPResponse) {
        guard response.status >= 400 else { return nil }
        let challenge = response.header("WWW-Authenticate").map(Self.challengeParameters) ?? [:]
        let body = JSONReading.object(response.body)
        guard let error = body?.string("error") ?? challenge["error"] else {
            self.error = "http_\(response.status)"
            description = ""
            parameters = challenge
            return
        }
        self.error = error
        description = body?.string("error_description") ?? challenge["error_description"] ?? ""
        parameters = challenge
        reason = body?.string("error_reason")
    }

    /// `Scheme a="b", c=d` → `[a: b, c: d]` (one challenge, as Relais sends).
    static func challengeParameters(_ header: String) -> [String: String] {
        var parameters: [String: String] = [:]
        var rest = Substring(header)
        if let space = rest.firstIndex(of: " ") { rest = rest[rest.index(after: space)...] }
        while !rest.isEmpty {
            rest = rest.drop { $0 == " " || $0 == "," }
            guard let equals = rest.firstIndex(of: "=") else { break }
            let name = rest[..<equals].trimmingCharacters(in: .whitespaces)
            rest = rest[rest.index(after: equals)...]
            var value = ""
            if rest.first == "\"" {
                rest = rest.dropFirst()
                var escaped = false
                while let character = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        value.append(character); escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        break
                    } else {
                        value.append(character)
                    }
                }
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<end].trimmingCharacters(in: .whitespaces)
                rest = rest[end...]
            }
            parameters[name] = value
        }
        return parameters
    }

    /// The library's error for this answer: Relais' code, passed through.
    func kitError(status: Int) -> RelaisKitError {
        var kitError = RelaisKitError(.relay(error), description.isEmpty ? "Relais answered \(status)" : description, status: status)
        kitError.relayReason = reason
        return kitError
    }
}
