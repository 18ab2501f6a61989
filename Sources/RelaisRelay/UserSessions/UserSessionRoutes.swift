import Hummingbird
import Logging
import RelaisJOSE
import RelaisServer

/// The person's own sessions, for an app's "devices signed in" screen. `GET /sessions` lists the
/// live sessions of the access token's person (at the token's provider, across apps);
/// `DELETE /sessions/{id}` ends one of them: its refresh token, its access tokens (at `/userinfo`,
/// `/auth` and `/introspect`) and the web sessions opened from it. Only a token reaches them, never
/// the web session cookie, so no other site can make a browser end a session.
struct UserSessionRoutes: RelayRoutes {
    let bearer: BearerAuthenticator
    let sessions: RelayStore
    let events: SecurityEventLog

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let api = router.surface(.bearer)
        api.get("/sessions") { request, _ in RelayResponse.json(.ok, serialized: try await list(request)) }
        api.delete("/sessions/:id") { request, context in try await end(request, id: context.parameters.get("id") ?? "", context: context) }
    }

    /// The caller: a live session's token, minted for Relais, with its proof when it is DPoP-bound.
    private func caller(_ request: Request) async throws -> BearerAuthenticator.AccessToken {
        let access = try await bearer.authenticate(request, session: .alive, target: .init(method: request.method.rawValue, url: bearer.issuer + request.uri.path))
        guard access.facts.audiences.contains(bearer.issuer) else { throw RelayError.invalidToken("the access token is not for Relais (aud)") }
        return access
    }

    private func list(_ request: Request) async throws -> [UInt8] {
        let access = try await caller(request)
        guard let provider = access.facts.providerID else { throw RelayError.invalidToken("the access token names no provider (idp)") }
        var listed: [(createdAt: Double, entry: JSONValue)] = []
        let sids = Array(try await sessions.sessions(ofSubject: access.subject, provider: provider))
        try await sessions.forEachBatch(ofLiveSessions: sids) { batch in
            for (sid, record) in batch {
                guard let session = record, session.subject == access.subject else { continue }  // ended since it was indexed
                let entry: [String: JSONValue] = [
                    "id": .string(sid), "current": .bool(sid == access.sid), "client_id": .string(session.clientID),
                    "device": session.origin.device.map(JSONValue.string) ?? .null, "created_at": .number(session.span.createdAt.rounded(.down)),
                    "last_used_at": .number((try await sessions.lastRefreshedIncludingEarlierVersions(sid, session) ?? session.span.createdAt).rounded(.down)),
                    "acr": session.acr.map(JSONValue.string) ?? .null, "attested": session.origin.attested.map { .string($0.platform) } ?? .null,
                    "expires_at": .number(session.span.expiresAt.rounded(.down)),
                    // A device signed in by this person's app: the session that approved it, which ends it when it ends.
                    "approved_by": session.origin.approvedBy.map(JSONValue.string) ?? .null,
                ]
                listed.append((session.span.createdAt, .object(entry)))
            }
        }
        // Newest first, as a device list reads.
        let entries = listed.sorted { $0.createdAt > $1.createdAt }.map(\.entry)
        return JSONValue.object(["sessions": .array(entries)]).serialized()
    }

    private func end(_ request: Request, id: String, context: RelaisRequestContext) async throws -> Response {
        let access = try await caller(request)
        // Someone else's session, or none: the same answer, so ids cannot be probed.
        guard let session = try await sessions.session(id), session.subject == access.subject, session.providerID == access.facts.providerID else {
            throw RelayError(.sessionNotFound, "no live session of yours has this id")
        }
        try await sessions.revoke(id, reason: .endedByUser)
        context.logger.info("session ended by its person", metadata: ["client_id": "\(session.clientID)", "current": "\(id == access.sid)"])
        events.record(.sessionEndedByUser, client: session.clientID, provider: session.providerID, sid: id, subject: session.subject)
        return Response(status: .noContent, headers: [.cacheControl: "no-store"])
    }
}
