import Hummingbird
import RelaisConfig
import RelaisJOSE
import RelaisServer

/// `/_test/...`: what tests use to make the provider misbehave. Served only with
/// `provider.test_api: true` (the default for a development provider).
///
/// - `POST /_test/faults` `{"fault": "token:status=503", "client_id": "app", "once": true}` → 201
/// - `GET /_test/faults` → the armed faults; `DELETE /_test/faults` → 204, all cleared
/// - `POST /_test/rotate-keys` → the new `kid`s, now signing and published beside the previous ones
struct TestAPIRoutes {
    let provider: DevProvider

    func register(on router: Router<RelaisRequestContext>) {
        router.post("/_test/faults") { request, _ in
            var request = request
            let body = try await request.collectBody(upTo: 16 * 1024)
            guard let object = JSONValue.object(from: Array(buffer: body)), let text = object["fault"]?.stringValue else {
                return DevProvider.oauthError(.badRequest, "invalid_request", #"expected a JSON object such as {"fault": "token:status=503", "once": true}"#)
            }
            let fault: Fault
            switch Fault.parse(text) {
            case .success(let parsed): fault = parsed
            case .failure(let error): return DevProvider.oauthError(.badRequest, "invalid_request", error.description)
            }
            let clientID = object["client_id"]?.stringValue
            if let clientID, provider.clients[clientID] == nil {
                return DevProvider.oauthError(.badRequest, "invalid_request", "unknown client_id '\(clientID)'")
            }
            let once: Bool
            switch object["once"] {
            case nil: once = true
            case .bool(let value)?: once = value
            default: return DevProvider.oauthError(.badRequest, "invalid_request", "'once' must be true or false")
            }
            let rule = try await provider.faults.arm(fault, clientID: clientID, once: once)
            return DevProvider.json(.created, Self.json(rule))
        }
        router.get("/_test/faults") { _, _ in
            DevProvider.json(.ok, .object(["faults": .array(try await provider.faults.armed().map(Self.json))]))
        }
        router.delete("/_test/faults") { _, _ in
            try await provider.faults.clear()
            return Response(status: .noContent)
        }
        router.post("/_test/rotate-keys") { _, _ in
            do {
                let kids = try await provider.keys.rotate()
                return DevProvider.json(.ok, .object(["kids": .array(kids.map { .string($0) })]))
            } catch let error as DevProviderError {
                return DevProvider.oauthError(.conflict, error.code, error.description)
            }
        }
    }

    private static func json(_ rule: FaultRule) -> JSONValue {
        .object([
            "id": .string(rule.id), "fault": .string(rule.fault.text), "client_id": rule.clientID.map { .string($0) } ?? .null, "once": .bool(rule.once),
        ])
    }
}
