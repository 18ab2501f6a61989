// The prose of docs/errors.md around the tables generated from the code. Edit here, then run
// `relais errors --markdown > docs/errors.md`; a test fails while the two differ.
extension ErrorCatalogue {
    static let introduction = #"""
        # Relais error catalogue

        Every error Relais reports has a **stable code**: clients, dashboards and alerts may match on it.
        Messages (`error_description`, log text) may change; codes do not. New codes are added here in the
        same change that introduces them.

        ## 1. HTTP API errors

        Every endpoint answers errors with one JSON shape, OAuth 2.0's (RFC 6749 §5.2), plus the request id
        that also appears in the log line of that request and in the `X-Request-Id` response header:

        ```json
        {"error": "request_too_large", "error_description": "The request body exceeds 65536 bytes.", "request_id": "Qm9vYmFyYmF6cXV4"}
        ```

        Responses carry `Cache-Control: no-store`.

        | code | status | when | what the caller should do |
        |---|---|---|---|
        | `not_found` | 404 | No endpoint at this path. | Fix the URL. |
        | `method_not_allowed` | 405 | The path exists but not for this method (RFC 9110 §15.5.6); `Allow` lists its methods. | Use one of the methods in `Allow`. |
        | `request_too_large` | 413 | The body exceeds `server.max_body_bytes` (declared in Content-Length, or found while reading a chunked body). | Send a smaller body. |
        | `invalid_request` | 400 | The HTTP request is malformed (framework-level parsing). | Fix the request. |
        | `server_error` | 500 | An unexpected error; its type is logged with the request id, never returned. | Retry later; report the request id. |
        | `http_<status>` | that status | Any other framework-level HTTP error, by status code. | Depends on the status. |

        ## 2. Readiness (`GET /readyz`)

        `200 {"status":"ready","checks":{"store":"ok"}}` or `503 {"status":"unavailable","checks":{...}}`.
        Details (addresses, Redis messages) go to the log only.

        | check | value | meaning |
        |---|---|---|
        | `store` | `store_unavailable` | Redis refused the connection, failed the TLS handshake or certificate check (`rediss://`), did not answer within `store.redis.command_timeout`, or rejected authentication. |
        | `store` | `store_command_failed` | Redis answered PING with something unexpected. |
        | `server` | `draining` | SIGTERM received: in-flight requests finish, the load balancer should route elsewhere. |

        `GET /healthz` always answers `200 {"status":"ok"}` while the process runs.
        """#

    static let storeIntroduction = #"""
        ## 3. Store errors (`RelaisStore.StoreError`)
        """#

    static let httpClientIntroduction = #"""
        ## 4. Outbound HTTP errors (`RelaisHTTPClient.HTTPClientError`)

        A response with any status (4xx, 5xx) is **data**, not an error: callers interpret it. These codes
        mean no usable response arrived.
        """#

    static let httpClientMetrics = #"""
        Metrics: `relais_http_client_request_duration_seconds{host, outcome}` where `outcome` is the HTTP
        status or one of these codes (or `cancelled`).
        """#

    static let joseIntroduction = #"""
        ## 5. Token errors (`RelaisJOSE.JOSEError`)

        Every refusal names one check. `relais jwt verify` prints `rejected: <code>: <reason>`.
        """#

    static let dpopIntroduction = #"""
        ### DPoP proofs (`RelaisJOSE.DPoPProofError`)

        `DPoPProofVerifier` (RFC 9449 §4.3) names the check a proof failed. A replayed `jti` is the
        caller's to detect (it needs memory shared by every instance).
        """#

    static let attestationIntroduction = #"""
        ### App attestation (`RelaisAttest.AttestationError`)

        `/attest/apple`, `/attest/apple/assertion`, `/attest/android` and `/attest/dev` refuse a platform
        proof with `attestation_refused`; the `error_description` starts with the code of the check that
        failed, and the `attestation refused` log line and the `relais_attestations_total{outcome}` metric
        carry it too. `relais attest apple|apple-assertion|android` prints the same codes.
        """#

    static let configuration = #"""
        ## 6. Configuration problems

        `relais check-config FILE` and `relais serve` validate the same way and report **every** problem at
        once, one per line, as `key.path: message` (or `RELAIS_VARIABLE: message`, or `(file): message` for
        a file that cannot be read or parsed). Unknown keys are errors, with a suggestion and line number:

        ```
        invalid configuration (3 problems):
          - server.port: must be between 0 and 65535, got 99999
          - store.kind: expected one of redis, embedded; got 'memcached'
          - store.redis.urll: unknown key (did you mean 'store.redis.url'?) (line 6)
        ```

        Secret values are never echoed in problems or logs. A file that is not valid YAML is reported by
        line, column and problem only (`(file): not valid YAML: mapping values are not allowed in this
        context at line 4, column 26`), never with the offending line, which may hold a secret.
        """#

    static let backchannelLogout = #"""
        ### `POST /backchannel-logout` (the provider, server to server)

        200 (`Cache-Control: no-store`, no body) once the named sessions have ended, also when none was
        left. Otherwise `invalid_request` (400); `error_description` says which check failed, so the
        provider's operator can fix it, and never quotes the token:

        | `error_description` starts with | when |
        |---|---|
        | `logout_token is missing`, `the body must be a form…` | The request is not a form with one `logout_token`. |
        | `no provider with back-channel logout enabled issued this token` | Its `iss` matches no provider with `backchannel_logout: true`. |
        | `provider_logout_token_rejected: jose_…` | Unreadable, bad signature, unknown key or algorithm (section 5 codes). |
        | `provider_logout_token_rejected: typ is '…', not logout+jwt` | A `typ` header other than `logout+jwt`. |
        | `provider_logout_token_rejected: jwt_iss`, `jwt_aud`, `jwt_iat`, `jwt_exp`, `jwt_required` | Another issuer or audience; `iat` missing, in the future or older than 5 minutes; `exp` past; `jti` or `events` missing. |
        | `provider_logout_token_rejected: events has no http://schemas.openid.net/event/backchannel-logout member` | Not a logout event. |
        | `provider_logout_token_rejected: a logout token must not carry a nonce` | A `nonce` claim (it would be an id_token). |
        | `provider_logout_token_rejected: neither sub nor sid names whom to log out` | Both missing. |
        | `provider_logout_token_rejected: this jti was already used (replay)` | The same `jti` within 10 minutes. |

        `temporarily_unavailable` (503) when the store cannot be reached: nothing ended, the provider should retry.
        Which sessions end: with `sid`, those Relais opened from that provider session (narrowed to `sub`
        when both are given); with `sub` only, or a `sid` Relais never saw, every session of that person
        at that provider.

        ### Startup

        `relay_startup` (logged at critical level, exit 1): the generated development keys could not be
        stored.
        """#

    static let developmentProviderAndExitCodes = #"""
        ## 8. Development provider (`relais dev-provider`)

        The development provider answers like FranceConnect, so the relay and apps meet the same errors
        they will meet in production. Codes starting with `Y0` are FranceConnect's own; `DP_` codes are the
        development provider's, for situations FranceConnect reports with codes we could not confirm.

        **`/authorize` error pages** (HTML, status 400, never a redirect: the client or its redirect URI
        cannot be trusted, or the browser is mid-login). The code is in `#error-code`.

        | code | when |
        |---|---|
        | `Y04EA6EF` | Unknown `client_id`. |
        | `Y04C013C` | `redirect_uri` not registered for the client (exact match). |
        | `Y030007` | `client_id` or `redirect_uri` missing or repeated; `acr_values`, `nonce`, `state`, `scope` or `response_type` missing; `nonce` under 22 characters; `prompt` empty or other than `login`/`consent` (FranceConnect's own parameter validation, before any redirect); parameters unreadable; login form without a listed identity. |
        | `DP_INTERACTION_EXPIRED` | The login page was already submitted, or it is older than 10 minutes. |
        | `DP_INJECTED_FAILURE` | An `authorize:status=N` or `logout:status=N` fault (status N). |

        **`/authorize` error redirects** (303 to the registered `redirect_uri` with `error`,
        `error_description`, `state` when given, and `iss` except in v1):

        | `error` | when |
        |---|---|
        | `invalid_request` | `response_type` or `state` empty; a parameter repeated or unknown (PKCE parameters included, as FranceConnect refuses them); `scope` without `openid`; `claims` not a JSON object. |
        | `unsupported_response_type` | `response_type` other than `code`. |
        | `invalid_scope` | A scope of the mode's catalogue that the client is not entitled to (`clients.<id>.scopes`): "requested scope is not allowed". An unknown scope is dropped, as FranceConnect drops it. |
        | `invalid_acr` | The level picked from `acr_values` (the weakest known one asked for, else the mode's default) is not the mode's (`eidas1`; FranceConnect+: `eidas2`, `eidas3`): "acr_value is not valid, should be equal one of these values, expected …, got …". |
        | `access_denied` | The person pressed cancel (`error_description=User auth aborted`). |

        **`/token`** (JSON `{error, error_description}`): `invalid_client` (401: unknown client, wrong
        secret, `client_secret_basic`, a method other than the registered one, a bad, expired, replayed or
        foreign-audience `private_key_jwt` assertion), `invalid_grant` (code unknown, used, expired, issued
        to another client, or `redirect_uri` differs), `invalid_request` (not a form, `code` or
        `grant_type` missing, a repeated parameter), `unsupported_grant_type` (anything but
        `authorization_code`: no refresh tokens), `server_error` (an injected `status` fault).

        **`/userinfo`**: 401 `invalid_token` with `WWW-Authenticate: Bearer ...` (missing, unknown or
        expired access token, 60 s).

        **`/session/end`** (v1: `/logout`) pages: `Y030007` (`id_token_hint` missing),
        `DP_ID_TOKEN_HINT` (the hint was not issued by this provider), `DP_POST_LOGOUT_URI` (the
        `post_logout_redirect_uri` is not registered for the hint's client).

        **Test API** (`/_test/...`): `invalid_request` (400: not JSON, unknown fault syntax, unknown
        `client_id`; the description says which), `dev_provider_keys_pinned` (409: keys come from
        `provider.signing_key_file` and cannot be rotated).

        **Startup**: `dev_provider_startup` (logged at critical level, exit 1): the signing key file cannot
        be read or is not a private EC/RSA key, or the stored keys cannot be read.

        ## 9. Exit codes

        | command | code | meaning |
        |---|---|---|
        | `relais check-config` | 0 / 2 | valid / at least one problem (as `serve`) |
        | `relais check-config --probe` | 0 / 2 / 1 | valid and everything reachable / at least one problem / the store or a provider unreachable (a `FAILED: reason` line each) |
        | `relais serve` | 0 | stopped by SIGTERM or SIGINT after draining |
        | `relais serve` | 2 | refused to start: invalid configuration (problems on stderr) |
        | `relais serve` | 1 | stopped on a runtime error (logged at critical level), or could not listen on its port (`relais could not start: cannot listen on host:port…`, say, another process holds it) |
        | `relais jwt verify` | 0 / 1 / 2 | verified / rejected (the failed check on stderr) / keys or token could not be read |
        | `relais jwt decode` | 0 / 1 | decoded / not a compact JWS or JWE |
        | `relais dev-provider` | 0 / 2 / 1 | stopped by SIGTERM or SIGINT / invalid configuration / runtime error |
        | `relais dev-provider --check` | 0 / 2 | valid / at least one problem |
        | `relais sessions revoke` | 0 / 1 / 2 | revoked (count printed) / store unreachable / invalid configuration, unknown `--provider`, or an embedded store (another process cannot see its sessions) |
        | `relais sessions list` | 0 / 1 / 2 | listed (count printed) / store unreachable / invalid configuration, unknown `--provider`, or an embedded store |
        | `relais attest apple-assertion` | 0 / 1 / 2 | genuine (the new counter printed) / refused (the failed step printed) / arguments or files unusable |
        | `relais --version`, `relais errors`, `relais security-events` | 0 | printed |
        """#
}
