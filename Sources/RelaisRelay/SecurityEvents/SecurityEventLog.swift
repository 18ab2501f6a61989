import RelaisClock
import RelaisCrypto
import RelaisServer

/// Where security event lines go: one complete JSON line (newline included) per call.
public protocol SecurityEventSink: Sendable {
    func write(_ line: String)
}

/// Writes security events (docs/security-events.md), one JSON object per line whatever
/// `log.format` says, so a SIEM parses them without knowing the log.
///
/// The `sid` and `sub` are keyed hashes (HMAC-SHA256, 128 bits, base64url): a SIEM correlates the
/// events of one session or one person without learning who it is, and without the key nobody
/// can test a guessed `sub` against them. No token, code or identity claim is ever written.
struct SecurityEventLog: Sendable {
    private let sink: (any SecurityEventSink)?
    private let hashKey: [UInt8]
    private let clock: any RelaisClock

    static let schemaVersion = 1

    init(sink: (any SecurityEventSink)?, hashKey: [UInt8], clock: any RelaisClock) {
        self.sink = sink
        self.hashKey = hashKey
        self.clock = clock
    }

    /// One `session.evicted` per session a sign-in ended to keep the person within `limit`.
    func sessionsEvicted(_ sids: [String], client: String, provider: String, subject: String, limit: Int) {
        for sid in sids { record(.sessionEvicted, client: client, provider: provider, sid: sid, subject: subject, [("limit", String(limit))]) }
    }

    /// Records an event. Who asked (address, user agent, request id) comes from the request being
    /// served (``EventOrigin``); `details` are the event's own fields (``SecurityEventKind/fields``).
    func record(
        _ kind: SecurityEventKind, reason: String? = nil, client: String? = nil, provider: String? = nil, sid: String? = nil, subject: String? = nil,
        _ details: [(String, String)] = []
    ) {
        guard let sink else { return }
        let origin = EventOrigin.current
        // One string, written in place: an event is on the path of every sign-in.
        var line = "{\"version\":\(Self.schemaVersion),\"event\":"
        line.reserveCapacity(512)
        LogText.appendQuoted(kind.rawValue, to: &line)
        line += ",\"time\":"
        LogText.appendQuoted(LogText.timestamp(clock.now), to: &line)
        line += ",\"outcome\":"
        LogText.appendQuoted(kind.outcome.rawValue, to: &line)
        let common: KeyValuePairs<String, String?> = [
            "reason": reason, "client_id": client, "provider": provider,
            "sid": sid.map { hash("sid", $0) }, "sub": subject.map { hash("sub", $0) },
            "ip": origin?.ip, "user_agent": origin?.userAgent, "request_id": origin?.requestID,
        ]
        for (name, value) in common { field(name, value, into: &line) }
        for (name, value) in details { field(name, value, into: &line) }
        line += "}\n"
        sink.write(line)
    }

    private func field(_ name: String, _ value: String?, into line: inout String) {
        line += ","
        LogText.appendQuoted(name, to: &line)
        line += ":"
        if let value { LogText.appendQuoted(value, to: &line) } else { line += "null" }
    }

    /// The hash a SIEM sees for a session id or a subject: distinct labels keep a sid's hash from
    /// ever equalling a sub's.
    func hash(_ label: String, _ value: String) -> String {
        Base64URL.encode(HMAC.sha256(key: hashKey, Array((label + ":" + value).utf8)).prefix(16))
    }
}
