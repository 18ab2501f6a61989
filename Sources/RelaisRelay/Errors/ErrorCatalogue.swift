import HTTPTypes
import RelaisAttest
import RelaisHTTPClient
import RelaisJOSE
import RelaisOIDC
import RelaisStore

/// docs/errors.md, generated from the error types themselves (`relais errors --markdown`): the
/// relay's ``RelayError/Code`` list and the catalogues of the store, the outbound client, the JOSE
/// layer and the provider client, around a little prose. A test fails when the committed file
/// differs, so the document cannot drift from the code.
public enum ErrorCatalogue {
    public static func markdown() -> String {
        [
            introduction,
            storeIntroduction + "\n" + table(["code", "meaning", "state after the error"], StoreError.catalogue.map { [code($0.code), $0.meaning, $0.stateAfter] }),
            httpClientIntroduction + "\n" + table(["code", "meaning"], HTTPClientError.catalogue.map { [code($0.code), $0.meaning] }) + "\n" + httpClientMetrics,
            joseIntroduction + "\n" + table(["code", "check that failed"], JOSEError.catalogue.map { [code($0.code), $0.check] }),
            dpopIntroduction + "\n" + table(["code", "check that failed"], DPoPProofError.catalogue.map { [code($0.code), $0.check] }),
            configuration,
            relay,
            attestationIntroduction + "\n" + table(["code", "check that failed"], AttestationError.Code.allCases.map { [code($0.rawValue), $0.check] }),
            backchannelLogout,
            developmentProviderAndExitCodes,
        ].joined(separator: "\n\n") + "\n"
    }

    static var relay: String {
        let codes = RelayError.Code.allCases.map { [code($0.wireCode), String($0.status.code), $0.surfaces, $0.meaning, $0.advice] }
        let upstream = UpstreamError.catalogue.map { [code($0.code), $0.meaning] }
        return """
            ## 7. The relay (what apps, APIs and gateways receive)

            One vocabulary for every endpoint. Where it reaches the caller depends on the endpoint:

            - **JSON** (RFC 6749 §5.2) at `/token`, `/introspect`, `/revoke` and `/backchannel-logout`:
              `{"error", "error_description", "request_id"}` with `Cache-Control: no-store`.
            - **Bearer** (RFC 6750 §3) at `/userinfo`, `/auth` and `POST /logout`: the same JSON, and
              `WWW-Authenticate: Bearer realm="relais", error="…", error_description="…"`.
            - **Redirect** to the app's verified `redirect_uri` with `error`, `error_description`, its own
              `state` and `iss` (RFC 9207), from `/authorize` and `/callback` once the app and its URI are known.
            - **Page** (HTML, the code in `#error-code`) when the client or its redirect URI cannot be
              trusted or the app to return to is unknown: Relais never redirects then, or it would be an
              open redirector.

            `/introspect` answers tokens that are not valid, expired, for another audience or whose session
            ended with `{"active": false}` (200), as RFC 7662 asks; `/revoke` answers unknown tokens with
            200 (RFC 7009 §2.2). `POST /logout` answers 204 once the session has ended.

            \(table(["`error`", "status", "where", "when", "what to do"], codes))

            Where one code covers situations a client must tell apart, the JSON body also carries
            `error_reason`, stable like the codes (the description is for people reading logs):

            \(table(["`error_reason`", "with", "when"], RelayError.Reason.allCases.map { [code($0.rawValue), "`invalid_grant`", $0.meaning] }))

            A `server_error` or `temporarily_unavailable` caused by the provider carries one of these codes
            at the start of its `error_description` (also in the `sign-in failed` log line, with the request id):

            \(table(["code", "meaning"], upstream))
            """
    }

    static func code(_ text: String) -> String { "`\(text)`" }

    static func table(_ header: [String], _ rows: [[String]]) -> String {
        func line(_ cells: [String]) -> String { "| " + cells.joined(separator: " | ") + " |" }
        return ([line(header), "|" + String(repeating: "---|", count: header.count)] + rows.map(line)).joined(separator: "\n")
    }
}
