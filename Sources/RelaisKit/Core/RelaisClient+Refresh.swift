import Foundation

extension RelaisClient {
    /// Tokens good for at least `margin` more seconds: the held ones, or fresh ones from one
    /// refresh shared by every caller that needs it at the same time (single flight).
    func validTokens(forceRefresh: Bool = false, margin: TimeInterval = 10) async throws -> TokenRecord {
        try await ensureLoaded()
        if let refreshTask { return try await refreshTask.value }
        guard let record else { throw RelaisKitError(.notSignedIn, "no session: sign in first") }
        if !forceRefresh, record.expiresAt > now.addingTimeInterval(margin) { return record }
        let task = Task { try await self.performRefresh(record) }
        refreshTask = task
        defer { if refreshTask == task { refreshTask = nil } }
        return try await task.value
    }

    /// Refreshes now, whatever the access token's age; concurrent callers share the refresh.
    @discardableResult
    public func refresh() async throws -> SessionSummary {
        let current = try await ensureRecord()
        if let refreshTask { return try await refreshTask.value.summary }
        let task = Task { try await self.performRefresh(current) }
        refreshTask = task
        defer { if refreshTask == task { refreshTask = nil } }
        return try await task.value.summary
    }

    func ensureRecord() async throws -> TokenRecord {
        try await ensureLoaded()
        guard let record else { throw RelaisKitError(.notSignedIn, "no session: sign in first") }
        return record
    }

    /// One refresh. The new tokens are stored before any waiter resumes. On `invalid_grant` the
    /// storage is read again: another process of the app may have refreshed with this token.
    private func performRefresh(_ held: TokenRecord) async throws -> TokenRecord {
        var used = held
        // Another process of the app (a widget, an extension) may have refreshed already: its
        // refresh token is the live one, and sending ours again would be a reuse.
        if let stored = try? platform.storage.decode(TokenRecord.self, keys.session), stored.refreshToken != nil, stored.refreshToken != held.refreshToken {
            used = stored
            record = stored
        }
        guard let refreshToken = used.refreshToken else {
            let error = RelaisKitError(.sessionEnded, "the session has no refresh token")
            try await endLocally(error)
            throw error
        }
        apply(.refreshStarted)
        do {
            let answer = try await tokenRequest([("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", configuration.clientID)])
            guard record == used else { return try heldInstead() }
            _ = try accept(answer, previous: used)
            apply(.refreshed(record!.summary))
            return record!
        } catch  where record != used {
            // The refresh failed after a sign-out or a new sign-in: not this session's error anymore.
            return try heldInstead()
        } catch let error as RelaisKitError where error.code == .relay("invalid_grant") {
            if let stored = try? platform.storage.decode(TokenRecord.self, keys.session), stored.refreshToken != refreshToken {
                record = stored
                apply(.refreshed(stored.summary))
                return stored
            }
            let ended = Self.cause(ofInvalidGrant: error)
            try await endLocally(ended)
            throw ended
        } catch {
            // Whatever failed (an app's own transport, the key), the state says it: never left refreshing.
            let error = RelaisKitError(wrapping: error)
            apply(.failed(error))
            throw error
        }
    }

    /// For a refresh whose session ended here while it was on its way (a sign-out), or that another
    /// sign-in replaced: its answer is dropped, and the waiters get what is held now.
    private func heldInstead() throws -> TokenRecord {
        guard let record else { throw RelaisKitError(.notSignedIn, "signed out while the refresh was under way") }
        return record
    }

    /// What a refused refresh means for the person, from Relais' stable `error_reason`
    /// (docs/errors.md §7, `invalid_grant`); without one (an older Relais), the session has ended.
    static func cause(ofInvalidGrant error: RelaisKitError) -> RelaisKitError {
        let description = error.message
        switch error.relayReason {
        case "refresh_token_reused":
            return RelaisKitError(.refreshTokenReused, "the refresh token was used twice; Relais ended the session (\(description))")
        case "dpop_key_mismatch":
            return RelaisKitError(.keyLost, "the session is bound to another key than this instance's (\(description))")
        default:
            return RelaisKitError(.sessionEnded, "the session has ended (\(description))")
        }
    }

    /// Sends a request with the session's access token: `Authorization: DPoP` and a proof with
    /// `ath` (or `Bearer`), refreshing first when the token is about to expire. A `use_dpop_nonce`
    /// challenge is answered once with the server's nonce; an `invalid_token` once with a refresh;
    /// `insufficient_user_authentication` becomes ``ClientState/stepUpRequired(acr:session:)`` and
    /// ``RelaisKitErrorCode/stepUpRequired``. Any other answer is returned as is.
    public func authorizedRequest(_ request: HTTPRequest) async throws -> HTTPResponse {
        var tokens = try await validTokens()
        var retriedNonce = false
        var retriedClock = false
        var refreshed = false
        while true {
            var sent = request
            if tokens.tokenType.caseInsensitiveCompare("DPoP") == .orderedSame {
                let key = try loadInstanceKey(create: false)
                guard key.thumbprint == tokens.dpopThumbprint else {
                    let error = RelaisKitError(.keyLost, "the instance key is not the one the tokens are bound to")
                    try await endLocally(error, revoke: tokens)
                    throw error
                }
                sent.headers.append((name: "Authorization", value: "DPoP " + tokens.accessToken))
                sent.headers.append((name: "DPoP", value: try proof(method: request.method, url: request.url, accessToken: tokens.accessToken, key: key)))
            } else {
                sent.headers.append((name: "Authorization", value: "Bearer " + tokens.accessToken))
            }
            let response = try await platform.transport.send(sent)
            remember(response, from: request.url)
            guard response.status == 401 || response.status == 403, let failure = RelayFailure(response) else { return response }
            // A DPoP challenge to a Bearer token: this call needs a bound token. Not an ended session:
            // no refresh would help, and nothing is signed out.
            if !sent.headers.contains(where: { $0.name == "DPoP" }), response.header("WWW-Authenticate")?.hasPrefix("DPoP ") == true {
                throw RelaisKitError(.dpopRequired, failure.description, status: response.status)
            }
            if !retriedClock, correctedClock(after: failure, response, from: request.url) {
                retriedClock = true
                continue
            }
            switch failure.error {
            case "use_dpop_nonce" where !retriedNonce && response.header("DPoP-Nonce") != nil:
                retriedNonce = true
            case "invalid_token" where !refreshed:
                refreshed = true
                tokens = try await validTokens(forceRefresh: record?.accessToken == tokens.accessToken)
            case "insufficient_user_authentication":
                var error = RelaisKitError(.stepUpRequired, failure.description, status: response.status)
                error.acr = failure.parameters["acr_values"]
                error.maxAge = failure.parameters["max_age"].flatMap { Int($0) }
                apply(.stepUpDemanded(acr: error.acr ?? ""))
                throw error
            default:
                return response
            }
        }
    }

    /// An authorized call to one of Relais' own JSON endpoints; a refusal becomes Relais' code.
    func relayCall(_ method: String, _ path: String, form: [(String, String)]? = nil) async throws -> HTTPResponse {
        _ = try await ensureRecord()
        let endpoints = try await endpoints()
        let url = path.hasPrefix("http") ? URL(string: path)! : endpoints.path(path)
        let request = form.map { HTTPRequest.form(url, $0) } ?? HTTPRequest(method: method, url: url)
        var sent = request
        sent.method = method
        let response = try await authorizedRequest(sent)
        if response.status >= 400 {
            let error = RelayFailure(response)?.kitError(status: response.status) ?? RelaisKitError(.invalidResponse, "\(path) answered \(response.status)")
            if error.code == .relay("invalid_token") {
                // A refreshed token refused too: the session has ended.
                let ended = RelaisKitError(.sessionEnded, error.message, status: response.status)
                try await endLocally(ended, revoke: record)
                throw ended
            }
            throw error
        }
        return response
    }
}
