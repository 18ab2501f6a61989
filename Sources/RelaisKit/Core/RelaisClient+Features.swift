public import Foundation

extension RelaisClient {
    /// The identity claims of the session (`/userinfo`), as JSON.
    /// - Parameter acr: the level the app needs; a lower one throws ``RelaisKitErrorCode/stepUpRequired``.
    public func userinfo(acr: String? = nil) async throws -> Data {
        _ = try await ensureRecord()
        let endpoints = try await endpoints()
        var components = URLComponents(url: endpoints.userinfo, resolvingAgainstBaseURL: false)!
        if let acr { components.queryItems = [URLQueryItem(name: "acr", value: acr)] }
        return try await relayCall("GET", components.url!.absoluteString).body
    }

    /// A URL that opens one of the app's web pages signed in (`POST /session_code`): open it in
    /// the webview at once (60 s, one use).
    /// - Parameter target: one of the app's `web_targets`; nil for the first.
    public func webSession(target: String? = nil) async throws -> WebSessionLink {
        var form = target.map { [("target", $0)] } ?? []
        // The web session outlives the access token: Relais wants more than a Bearer token for it,
        // the session's refresh token (a DPoP-bound token is proven by its key instead).
        let tokens = try await validTokens()
        if tokens.tokenType.caseInsensitiveCompare("DPoP") != .orderedSame, let refresh = tokens.refreshToken { form.append(("refresh_token", refresh)) }
        let response = try await relayCall("POST", "/session_code", form: form)
        guard let answer = JSONReading.object(response.body), let uri = answer.string("session_uri"), let url = URL(string: uri) else {
            throw RelaisKitError(.invalidResponse, "/session_code gave no session_uri")
        }
        return WebSessionLink(url: url, target: answer.string("target") ?? "")
    }

    /// The user code in what the person scanned or typed: a `verification_uri_complete`
    /// (`…/device?user_code=WDJB-MJHT`) or the code itself, in any case, with or without the dash.
    public nonisolated static func userCode(from scannedOrTyped: String) throws -> String {
        var text = scannedOrTyped.trimmingCharacters(in: .whitespacesAndNewlines)
        if let components = URLComponents(string: text), components.scheme != nil {
            guard let code = components.queryItems?.first(where: { $0.name == "user_code" })?.value else {
                throw RelaisKitError(.invalidArgument, "the link carries no user_code")
            }
            text = code
        }
        let letters = text.uppercased().filter { $0.isLetter }
        guard letters.count == 8, text.allSatisfy({ $0.isLetter || $0 == "-" || $0 == " " }) else {
            throw RelaisKitError(.invalidArgument, "a user code is 8 letters, XXXX-XXXX")
        }
        return String(letters.prefix(4)) + "-" + String(letters.suffix(4))
    }

    /// What a device asks for (`POST /device/inspect`): show it to the person before approving.
    public func inspectDevice(_ scannedOrTyped: String) async throws -> DeviceRequestContext {
        let code = try Self.userCode(from: scannedOrTyped)
        return try Self.context(try await relayCall("POST", "/device/inspect", form: [("user_code", code)]), code: code)
    }

    /// Approves (or denies) the device's sign-in with this session (`POST /device/approve`).
    public func approveDevice(_ scannedOrTyped: String, approve: Bool = true) async throws -> DeviceRequestContext {
        let code = try Self.userCode(from: scannedOrTyped)
        let response = try await relayCall("POST", "/device/approve", form: [("user_code", code), ("decision", approve ? "approve" : "deny")])
        return try Self.context(response, code: code)
    }

    private static func context(_ response: HTTPResponse, code: String) throws -> DeviceRequestContext {
        guard let answer = JSONReading.object(response.body), let client = answer.string("client_id") else {
            throw RelaisKitError(.invalidResponse, "the device request answer has no client_id")
        }
        return DeviceRequestContext(
            clientID: client, appName: answer.string("app_name") ?? client, requestedAt: answer.int("requested_at").map { Date(timeIntervalSince1970: TimeInterval($0)) },
            requesterAddress: answer.string("requester_address"), device: answer.string("device"), scope: answer.string("scope") ?? "",
            expiresIn: answer.int("expires_in") ?? 0, approved: answer.bool("approved"), userCode: code
        )
    }

    /// The person's live sessions at the session's provider, newest first (`GET /sessions`).
    public func sessions() async throws -> [RelaisSession] {
        let response = try await relayCall("GET", "/sessions")
        guard let answer = JSONReading.object(response.body), let list = answer.array("sessions") else {
            throw RelaisKitError(.invalidResponse, "/sessions gave no list")
        }
        return list.compactMap { item in
            guard case .object(let entry) = item, let id = entry.string("id") else { return nil }
            let date = { (name: String) in Date(timeIntervalSince1970: TimeInterval(entry.int(name) ?? 0)) }
            return RelaisSession(
                id: id, current: entry.bool("current") ?? false, approvedBy: entry.string("approved_by"), clientID: entry.string("client_id") ?? "",
                device: entry.string("device"),
                createdAt: date("created_at"), lastUsedAt: date("last_used_at"), acr: entry.string("acr"), attested: entry.string("attested"),
                expiresAt: date("expires_at")
            )
        }
    }

    /// Ends one of the person's sessions (`DELETE /sessions/{id}`). Ending the current one signs
    /// this app out.
    public func endSession(id: String) async throws {
        let current = record?.sessionID
        let escaped = id.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? id
        _ = try await relayCall("DELETE", "/sessions/" + escaped)
        if id == current { try await endLocally(RelaisKitError(.sessionEnded, "this session was ended")); apply(.signedOut) }
    }

    /// Signs out: Relais' logout (`POST /logout` with the refresh token) ends the session and its
    /// tokens and web sessions, `/revoke` makes sure of the refresh token, then the tokens are
    /// forgotten here. Returns whether Relais confirmed; the local tokens go in every case.
    @discardableResult
    public func signOut() async throws -> Bool {
        try await ensureLoaded()
        guard let held = record else {
            apply(.signedOut)
            return true
        }
        apply(.signOutStarted)
        var confirmed = false
        if let token = held.refreshToken, let endpoints = try? await endpoints() {
            // A DPoP-bound refresh token acts only with a proof by its key (RFC 9449 §5), ending the session included.
            let key = held.dpopThumbprint == nil ? nil : try? loadInstanceKey(create: false)
            func signed(_ request: HTTPRequest) -> HTTPRequest {
                guard let key, let proof = try? proof(method: "POST", url: request.url, accessToken: nil, key: key) else { return request }
                var request = request
                request.headers.append((name: "DPoP", value: proof))
                return request
            }
            let logout = try? await platform.transport.send(signed(.form(endpoints.path("/logout"), [("client_id", configuration.clientID), ("refresh_token", token)])))
            let revoke = try? await platform.transport.send(
                signed(.form(endpoints.revocation, [("token", token), ("token_type_hint", "refresh_token"), ("client_id", configuration.clientID)]))
            )
            confirmed = logout?.status == 204 || revoke?.status == 200
        }
        record = nil
        refreshTask = nil
        try platform.storage.delete(keys.session)
        apply(.signedOut)
        return confirmed
    }

    /// The session's summary (state, acr, expiry, DPoP thumbprint, attestation), reading the storage if needed.
    public func status() async throws -> SessionSummary? {
        try await ensureLoaded()
        return record?.summary
    }
}
