import Hummingbird
import RelaisConfig
import RelaisJOSE
import RelaisServer

/// A tiny "app" for `make demo` (development only): it plays a mobile app's part in a browser —
/// PKCE, /authorize, the code exchange, /userinfo — so a person can click through a sign-in.
/// It is served for the first app that registers `{public_base_url}/demo/callback`. When that app
/// uses attestation and DPoP and the development attester is on, the page can also play an attested
/// app: a WebCrypto key as the instance key, `/attest/dev`, `dpop_jkt`, the attestation and PoP at
/// `/token`, DPoP proofs at `/token` and `/userinfo`.
struct DemoAppRoutes: RelayRoutes {
    let issuer: String
    let apps: [AppSettings]
    let devAttester: Bool
    let webSessions: WebSessionAuthenticator
    let vault: SessionVault

    /// The web page the demo opens through a session code: it shows whom its cookie signs in.
    static let webPath = "/demo/web"

    func register(on router: Router<RelaisRequestContext>) {
        let redirect = issuer + "/demo/callback"
        guard let app = apps.first(where: { $0.redirectURIs.contains(redirect) }) else { return }
        let mobile = devAttester && app.attestation != .off && app.dpop != .off
        let page = Self.page(issuer: issuer, clientID: app.clientID, redirectURI: redirect, scopes: app.scopes, providers: app.providers, mobile: mobile)
        let html: @Sendable (Request, RelaisRequestContext) -> Response = { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"], body: .init(byteBuffer: .init(string: page)))
        }
        router.get("/demo", use: html)
        router.get("/demo/callback", use: html)
        router.get(RouterPath(Self.webPath)) { request, context in
            try await RelayError.rendering(.page, context) { try await webPage(request) }
        }
    }

    /// A page behind the web session cookie, as a web app behind the gateway would be.
    private func webPage(_ request: Request) async throws -> Response {
        let (_, session) = try await webSessions.authenticate(request)
        let identity = await vault.openIdentityAfterSync(session.sealedIdentity)
        let name = [identity?.claims["given_name"]?.stringValue, identity?.claims["family_name"]?.stringValue].compactMap { $0 }.joined(separator: " ")
        let html = """
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — page web</title>
            <style>body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#161616} h1{font-size:1.4rem;color:#000091}</style>
            </head><body>
            <h1>Page web de démonstration</h1>
            <p id="web-welcome">Connecté·e sur le web : \(HTMLText.escape(name.isEmpty ? session.subject : name))</p>
            <p>This page was opened from the app's tokens through a session code: the browser holds Relais' web session
            cookie (<code>\(WebSessionAuthenticator.cookieName)</code>), tied to the app's session
            (<code>client_id=\(HTMLText.escape(session.clientID))</code>, acr <code id="web-acr">\(HTMLText.escape(session.acr ?? ""))</code>).
            Signing out in the app ends it.</p>
            </body></html>
            """
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"], body: .init(byteBuffer: .init(string: html)))
    }

    static func page(issuer: String, clientID: String, redirectURI: String, scopes: [String], providers: [String], mobile: Bool) -> String {
        let options = providers.map { "<option value=\"\(HTMLText.escape($0))\">\(HTMLText.escape($0))</option>" }.joined()
        return """
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — application de démonstration</title>
            <style>
            body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#161616}
            h1{font-size:1.4rem;color:#000091} button{font-size:1rem;padding:.6rem 1rem;background:#000091;color:#fff;border:0;cursor:pointer}
            table{border-collapse:collapse;margin:1rem 0} td,th{border:1px solid #ddd;padding:.3rem .6rem;text-align:left}
            pre{background:#f4f4f4;padding:.6rem;overflow:auto;font-size:.8rem} .error{color:#b00}
            </style></head><body>
            <h1>Application de démonstration</h1>
            <p>This page plays the mobile app: it starts an OAuth 2.0 sign-in with PKCE at Relais
            (<code>client_id=\(HTMLText.escape(clientID))</code>), then exchanges the code and calls <code>/userinfo</code>.</p>
            <div id="start">
              <label>Provider <select id="provider">\(options)</select></label>
              \(mobile ? #"<p><label><input type="checkbox" id="attested"> As an attested app with DPoP-bound tokens (development attester)</label></p>"# : "")
              <button id="sign-in">Se connecter avec FranceConnect</button>
            </div>
            <div id="result"></div>
            <script>
            const issuer = \(jsString(issuer)), clientId = \(jsString(clientID)), redirectUri = \(jsString(redirectURI)), scope = \(jsString(scopes.joined(separator: " ")));
            const b64url = bytes => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
            const random = n => b64url(crypto.getRandomValues(new Uint8Array(n)));
            const show = html => { document.getElementById("result").innerHTML = html; };
            const escape = text => String(text).replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\\"":"&quot;","'":"&#39;"})[c]);
            const claimsOf = jwt => JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
            const utf8 = text => new TextEncoder().encode(text);
            const b64json = value => b64url(utf8(JSON.stringify(value)));
            const form = async (path, fields) => (await fetch(path, {method: "POST", body: new URLSearchParams(fields)})).json();
            // The attested app's instance key (P-256). A real app keeps it in the Secure Enclave or
            // Android Keystore; the demo keeps it in sessionStorage across the provider's pages.
            const thumbprint = async pub => b64url(await crypto.subtle.digest("SHA-256", utf8(JSON.stringify({crv: pub.crv, kty: pub.kty, x: pub.x, y: pub.y}))));
            const signJWT = async (header, claims, jwk) => {
              const key = await crypto.subtle.importKey("jwk", jwk, {name: "ECDSA", namedCurve: "P-256"}, false, ["sign"]);
              const input = b64json({alg: "ES256", ...header}) + "." + b64json(claims);
              return input + "." + b64url(await crypto.subtle.sign({name: "ECDSA", hash: "SHA-256"}, key, utf8(input)));
            };
            const now = () => Math.floor(Date.now() / 1000);
            // RFC 9449: a proof per request; one retry when Relais asks for its nonce (use_dpop_nonce).
            const dpopFetch = async (saved, method, path, init, accessToken) => {
              let nonce;
              for (let attempt = 0; ; attempt++) {
                const claims = {jti: random(16), htm: method, htu: issuer + path, iat: now()};
                if (accessToken) claims.ath = b64url(await crypto.subtle.digest("SHA-256", utf8(accessToken)));
                if (nonce) claims.nonce = nonce;
                const headers = {...init.headers, DPoP: await signJWT({typ: "dpop+jwt", jwk: saved.pub}, claims, saved.priv)};
                const response = await fetch(path, {...init, method, headers});
                nonce = response.headers.get("DPoP-Nonce");
                if (attempt > 0 || !nonce || response.ok) return response;
              }
            };
            document.getElementById("sign-in").onclick = async () => {
              const verifier = random(32), state = random(16), nonce = random(16);
              const challenge = b64url(await crypto.subtle.digest("SHA-256", utf8(verifier)));
              const saved = {verifier, state, nonce};
              const params = new URLSearchParams({response_type: "code", client_id: clientId, redirect_uri: redirectUri, scope, state, nonce,
                code_challenge: challenge, code_challenge_method: "S256", provider: document.getElementById("provider").value});
              if (document.getElementById("attested")?.checked) {
                const pair = await crypto.subtle.generateKey({name: "ECDSA", namedCurve: "P-256"}, true, ["sign", "verify"]);
                saved.priv = await crypto.subtle.exportKey("jwk", pair.privateKey);
                saved.pub = {kty: "EC", crv: "P-256", x: saved.priv.x, y: saved.priv.y};
                const issued = await form("/attest/challenge", {client_id: clientId});
                const attested = await form("/attest/dev", {client_id: clientId, challenge: issued.attestation_challenge || "", jwk: JSON.stringify(saved.pub)});
                if (!attested.client_attestation) { show(`<p class="error" id="error">${escape(attested.error)}: ${escape(attested.error_description)}</p>`); return; }
                saved.attestation = attested.client_attestation;
                params.set("dpop_jkt", await thumbprint(saved.pub));
              }
              sessionStorage.setItem("demo", JSON.stringify(saved));
              location.assign("/authorize?" + params);
            };
            (async () => {
              const query = new URLSearchParams(location.search);
              if (!location.pathname.endsWith("/callback")) return;
              document.getElementById("start").hidden = true;
              const saved = JSON.parse(sessionStorage.getItem("demo") || "{}");
              if (query.get("error")) { show(`<p class="error" id="error">${escape(query.get("error"))}: ${escape(query.get("error_description") || "")}</p><p><a href="/demo/">Recommencer</a></p>`); return; }
              if (query.get("state") !== saved.state) { show(`<p class="error" id="error">state mismatch</p>`); return; }
              const body = new URLSearchParams({grant_type: "authorization_code", code: query.get("code"), redirect_uri: redirectUri, client_id: clientId, code_verifier: saved.verifier});
              let tokens;
              if (saved.attestation) {
                const pop = await signJWT({typ: "oauth-client-attestation-pop+jwt"}, {iss: clientId, aud: issuer, jti: random(16), iat: now()}, saved.priv);
                const headers = {"OAuth-Client-Attestation": saved.attestation, "OAuth-Client-Attestation-PoP": pop};
                tokens = await (await dpopFetch(saved, "POST", "/token", {body, headers})).json();
              } else {
                tokens = await (await fetch("/token", {method: "POST", body})).json();
              }
              if (!tokens.access_token) { show(`<p class="error" id="error">${escape(tokens.error)}: ${escape(tokens.error_description)}</p>`); return; }
              const idToken = claimsOf(tokens.id_token);
              if (idToken.nonce !== saved.nonce) { show(`<p class="error" id="error">nonce mismatch</p>`); return; }
              const userinfoResponse = tokens.token_type === "DPoP"
                ? await dpopFetch(saved, "GET", "/userinfo", {headers: {Authorization: "DPoP " + tokens.access_token}}, tokens.access_token)
                : await fetch("/userinfo", {headers: {Authorization: "Bearer " + tokens.access_token}});
              const userinfo = await userinfoResponse.json();
              if (!userinfoResponse.ok) { show(`<p class="error" id="error">/userinfo: ${escape(userinfoResponse.headers.get("WWW-Authenticate") || userinfoResponse.status)}</p>`); return; }
              const access = claimsOf(tokens.access_token);
              const rows = Object.entries(userinfo).map(([k, v]) => `<tr><th>${escape(k)}</th><td id="claim-${escape(k)}">${escape(Array.isArray(v) ? v.join(", ") : v)}</td></tr>`).join("");
              show(`<h2 id="welcome">Bonjour ${escape(userinfo.given_name || userinfo.sub)}</h2><table id="claims">${rows}</table>
                <p>acr: <code id="acr">${escape(idToken.acr || "")}</code> · provider: <code>${escape(idToken.idp)}</code>
                · token_type: <code id="token-type">${escape(tokens.token_type)}</code> · attested: <code id="attested-by">${escape(access.attested || "no")}</code>
                ${access.cnf ? `· bound to key <code id="jkt">${escape(access.cnf.jkt)}</code>` : ""}</p>
                <p><button id="open-web">Ouvrir une page web connectée</button></p>
                <p><label>Autoriser un appareil : <input id="approve-code" placeholder="BCDF-GHJK" size="10"></label>
                <button id="approve-device">Autoriser</button> <span id="approve-result"></span></p>
                <details><summary>Token response</summary><pre>${escape(JSON.stringify(tokens, null, 2))}</pre></details>
                <p><a href="/demo/">Recommencer</a></p>`);
              // A session code turns the app's tokens into a web session in the webview (here, this tab).
              document.getElementById("open-web").onclick = async () => {
                const init = {headers: {Authorization: `${tokens.token_type === "DPoP" ? "DPoP" : "Bearer"} ${tokens.access_token}`}};
                const response = tokens.token_type === "DPoP"
                  ? await dpopFetch(saved, "POST", "/session_code", init, tokens.access_token)
                  : await fetch("/session_code", {...init, method: "POST"});
                const issued = await response.json();
                if (!issued.session_uri) { show(`<p class="error" id="error">${escape(issued.error)}: ${escape(issued.error_description)}</p>`); return; }
                location.assign(issued.session_uri);
              };
              // Sign-in on another device: the code (or QR) shown on a desktop, approved with this app's tokens.
              document.getElementById("approve-device").onclick = async () => {
                const init = {headers: {Authorization: `${tokens.token_type === "DPoP" ? "DPoP" : "Bearer"} ${tokens.access_token}`},
                  body: new URLSearchParams({user_code: document.getElementById("approve-code").value})};
                const response = tokens.token_type === "DPoP"
                  ? await dpopFetch(saved, "POST", "/device/approve", init, tokens.access_token)
                  : await fetch("/device/approve", {...init, method: "POST"});
                const answer = await response.json();
                document.getElementById("approve-result").textContent = answer.approved ? `${answer.client_id} autorisé` : `${answer.error}: ${answer.error_description}`;
              };
            })();
            </script>
            </body></html>
            """
    }

    /// A JSON string is a JavaScript string literal; `<`, `>` and `&` are escaped on top so no
    /// value can close the script element.
    static func jsString(_ text: String) -> String {
        String(decoding: JSONValue.string(text).serialized(), as: UTF8.self)
            .replacingAll("<", "\\u003c").replacingAll(">", "\\u003e").replacingAll("&", "\\u0026")
    }
}

extension String {
    fileprivate func replacingAll(_ target: Character, _ replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
