import RelaisConfig
import RelaisJOSE
import RelaisServer

/// The demo app's page (development only): it plays a mobile app in a browser. It signs in with
/// the buttons of FranceConnect's and ProConnect's design kits (PKCE, `/authorize`, the code
/// exchange, `/userinfo`), then offers what an app does with its tokens: refresh them, step up to
/// FranceConnect+ (RFC 9470), open a web page signed in through a session code, approve a device,
/// sign out. With the development attester it can also play an attested app with DPoP-bound tokens
/// (a WebCrypto key as the instance key).
struct DemoAppPage {
    let issuer: String
    let clientID: String
    let redirectURI: String
    let scopes: [String]
    /// The app's providers, its default first.
    let providers: [ProviderSettings]
    let mobile: Bool

    /// Providers reached only by stepping up get no button of their own.
    private var startProviders: [ProviderSettings] {
        let stepUpTargets = Set(providers.compactMap(\.stepUpProvider))
        let starting = providers.filter { !stepUpTargets.contains($0.id) }
        return starting.isEmpty ? providers : starting
    }

    /// Provider id → the level its step-up provider gives first, for the step-up button.
    private var stepUps: JSONValue {
        var levels: [String: JSONValue] = [:]
        for provider in providers {
            guard let target = provider.stepUpProvider, let next = providers.first(where: { $0.id == target }), let level = next.acrValuesSupported.first else { continue }
            levels[provider.id] = .string(level)
        }
        return .object(levels)
    }

    func html() -> String {
        let buttons = startProviders.enumerated().map { index, provider in
            Self.connectButton(provider, id: index == 0 ? "sign-in" : "sign-in-\(provider.id)")
        }.joined(separator: "\n")
        let stepUpButton = Self.connectGroup(
            id: "step-up", brand: "FranceConnect", plus: true, link: "https://franceconnect.gouv.fr/france-connect-plus",
            question: "Qu’est-ce que FranceConnect+ ?", attributes: ""
        )
        return #"""
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — application de démonstration</title>
            <style>\#(Self.style)</style></head><body>
            <h1>Application de démonstration</h1>
            <p class="lead">This page plays the mobile app: an OAuth 2.0 sign-in with PKCE at Relais
            (<code>client_id=\#(HTMLText.escape(clientID))</code>), the code exchange, then <code>/userinfo</code>.</p>
            <p id="signed-out" class="notice" hidden>Vous êtes déconnecté·e, de Relais et du fournisseur.</p>
            <div id="start">
              \#(mobile ? #"<p><label><input type="checkbox" id="attested"> As an attested app (development attester)</label></p>"# : "")
            \#(buttons)
            </div>
            <div id="result"></div>
            <template id="step-up-template">\#(stepUpButton)</template>
            <script>
            const issuer = \#(DemoAppRoutes.jsString(issuer)), clientId = \#(DemoAppRoutes.jsString(clientID)), redirectUri = \#(DemoAppRoutes.jsString(redirectURI));
            const scope = \#(DemoAppRoutes.jsString(scopes.joined(separator: " "))), stepUps = \#(DemoAppRoutes.jsValue(stepUps));
            \#(Self.script)
            </script>
            </body></html>
            """#
    }

    /// The design kit's button: "S’identifier avec" and the brand, a link below that explains it.
    static func connectButton(_ provider: ProviderSettings, id: String) -> String {
        let attributes = #" data-provider="\#(HTMLText.escape(provider.id))""#
        switch provider.preset {
        case .franceconnectV2, .franceconnectV1:
            return connectGroup(id: id, brand: "FranceConnect", plus: false, link: "https://franceconnect.gouv.fr/", question: "Qu’est-ce que FranceConnect ?", attributes: attributes)
        case .franceconnectPlus:
            return connectGroup(
                id: id, brand: "FranceConnect", plus: true, link: "https://franceconnect.gouv.fr/france-connect-plus", question: "Qu’est-ce que FranceConnect+ ?",
                attributes: attributes
            )
        case .proconnect:
            return connectGroup(id: id, brand: "ProConnect", plus: false, link: "https://www.proconnect.gouv.fr/", question: "Qu’est-ce que ProConnect ?", attributes: attributes)
        case .oidc:
            return #"<p><button class="plain" id="\#(HTMLText.escape(id))"\#(attributes)>Se connecter avec \#(HTMLText.escape(provider.id))</button></p>"#
        }
    }

    static func connectGroup(id: String, brand: String, plus: Bool, link: String, question: String, attributes: String) -> String {
        #"""
        <div class="fr-connect-group">
          <button class="fr-connect\#(plus ? " fr-connect--plus" : "")" id="\#(HTMLText.escape(id))"\#(attributes)><span class="fr-connect__login">S’identifier avec</span> <span class="fr-connect__brand">\#(brand)</span></button>
          <p><a href="\#(link)" target="_blank" rel="noopener" title="\#(question) - nouvelle fenêtre">\#(question)</a></p>
        </div>
        """#
    }

    // Readable from 360 px wide: one column, buttons at full width on small screens.
    private static let style = #"""
        body{font-family:system-ui,sans-serif;max-width:42rem;margin:1.5rem auto;padding:0 1rem;color:#161616;line-height:1.4}
        h1{font-size:1.4rem;color:#000091} h2{font-size:1.2rem} .lead{color:#3a3a3a}
        .fr-connect-group{margin:1.25rem 0} .fr-connect-group p{margin:.4rem 0 0;font-size:.85rem}
        .fr-connect{display:inline-flex;flex-wrap:wrap;align-items:center;gap:.3rem;min-height:3.5rem;padding:.75rem 1.25rem .75rem 3.5rem;
          border:0;background:#000091 no-repeat left 1rem center/1.75rem url("data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 28 28'%3E%3Cpath fill='%23fff' d='M14 2 25 8v12L14 26 3 20V8z' opacity='.9'/%3E%3Cpath fill='%23e1000f' d='M14 8l6 3.5v5L14 20l-6-3.5v-5z'/%3E%3C/svg%3E");
          color:#fff;cursor:pointer;font:inherit;text-align:left}
        .fr-connect:hover{background-color:#1212ff} .fr-connect__login{font-size:1rem} .fr-connect__brand{font-size:1.1rem;font-weight:700}
        .fr-connect--plus .fr-connect__brand::after{content:"+";margin-left:.1rem}
        button.plain,.actions button{font:inherit;padding:.6rem 1rem;background:#fff;color:#000091;border:1px solid #000091;cursor:pointer}
        .actions{display:flex;flex-direction:column;gap:.6rem;margin:1rem 0} .actions input{font:inherit;padding:.5rem;max-width:10rem}
        table{border-collapse:collapse;margin:1rem 0;width:100%;table-layout:fixed} td,th{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;overflow-wrap:anywhere}
        th{width:40%} code{overflow-wrap:anywhere} pre{background:#f4f4f4;padding:.6rem;overflow:auto;font-size:.75rem}
        .error{color:#b00} .notice{background:#e8edff;padding:.6rem} #refresh-result,#approve-result{font-size:.9rem}
        @media (max-width:480px){.fr-connect,.actions button{width:100%}}
        """#

    private static let script = #"""
        const b64url = bytes => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
        const random = n => b64url(crypto.getRandomValues(new Uint8Array(n)));
        const show = html => { document.getElementById("result").innerHTML = html; };
        const escape = text => String(text).replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;","'":"&#39;"})[c]);
        const claimsOf = jwt => JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
        const utf8 = text => new TextEncoder().encode(text);
        const b64json = value => b64url(utf8(JSON.stringify(value)));
        const form = async (path, fields) => (await fetch(path, {method: "POST", body: new URLSearchParams(fields)})).json();
        const load = () => JSON.parse(sessionStorage.getItem("demo") || "{}");
        const save = saved => sessionStorage.setItem("demo", JSON.stringify(saved));
        // After a failed step-up the app is still signed in: "Retour" shows its session again.
        const failure = (what, answer) => show(`<p class="error" id="error">${escape(what)}${escape(answer.error || "")}: ${escape(answer.error_description || "")}</p>
          <p><a href="/demo/" id="back">Retour</a> · <a href="/demo/" id="restart">Recommencer</a></p>`);
        document.addEventListener("click", event => { if (event.target.id === "restart") sessionStorage.removeItem("demo"); });
        // The app instance's key (P-256), to which its tokens are bound. A real app keeps it in the Secure Enclave or
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
        // /token, as the app calls it: with a DPoP proof by its key, and its attestation when it is attested.
        const tokenRequest = async (saved, fields) => {
          const body = new URLSearchParams({client_id: clientId, ...fields});
          if (!saved.pub) return (await fetch("/token", {method: "POST", body})).json();
          const headers = {};
          if (saved.attestation) {
            headers["OAuth-Client-Attestation"] = saved.attestation;
            headers["OAuth-Client-Attestation-PoP"] = await signJWT({typ: "oauth-client-attestation-pop+jwt"}, {iss: clientId, aud: issuer, jti: random(16), iat: now()}, saved.priv);
          }
          return (await dpopFetch(saved, "POST", "/token", {body, headers})).json();
        };
        const withToken = async (saved, method, path, init = {}) => {
          const tokens = saved.tokens, bound = tokens.token_type === "DPoP";
          const request = {...init, headers: {...(init.headers || {}), Authorization: `${bound ? "DPoP" : "Bearer"} ${tokens.access_token}`}};
          return bound ? dpopFetch(saved, method, path, request, tokens.access_token) : fetch(path, {...request, method});
        };
        // A sign-in: a new PKCE pair, state and nonce; `extra` adds acr_values and id_token_hint for a step-up.
        const signIn = async (provider, extra = {}) => {
          const previous = load();
          const verifier = random(32), state = random(16), nonce = random(16);
          const saved = {verifier, state, nonce, tokens: previous.tokens, userinfo: previous.userinfo};
          const params = new URLSearchParams({response_type: "code", client_id: clientId, redirect_uri: redirectUri, scope, state, nonce,
            code_challenge: b64url(await crypto.subtle.digest("SHA-256", utf8(verifier))), code_challenge_method: "S256", provider, ...extra});
          // Tokens are always DPoP-bound (approving a device takes a bound token). A step-up keeps
          // the app instance's key and attestation; a new sign-in makes them anew.
          if (extra.id_token_hint && previous.priv) {
            Object.assign(saved, {priv: previous.priv, pub: previous.pub, attestation: previous.attestation});
          } else if (!extra.id_token_hint) {
            const pair = await crypto.subtle.generateKey({name: "ECDSA", namedCurve: "P-256"}, true, ["sign", "verify"]);
            saved.priv = await crypto.subtle.exportKey("jwk", pair.privateKey);
            saved.pub = {kty: "EC", crv: "P-256", x: saved.priv.x, y: saved.priv.y};
          }
          if (!extra.id_token_hint && document.getElementById("attested")?.checked) {
            const issued = await form("/attest/challenge", {client_id: clientId});
            const answer = await form("/attest/dev", {client_id: clientId, challenge: issued.attestation_challenge || "", jwk: JSON.stringify(saved.pub)});
            if (!answer.client_attestation) { failure("", answer); return; }
            saved.attestation = answer.client_attestation;
          }
          if (saved.pub) params.set("dpop_jkt", await thumbprint(saved.pub));
          save(saved);
          location.assign("/authorize?" + params);
        };
        for (const button of document.querySelectorAll("#start .fr-connect, #start button.plain")) {
          button.onclick = () => signIn(button.dataset.provider);
        }
        const render = saved => {
          const tokens = saved.tokens, userinfo = saved.userinfo, idToken = claimsOf(tokens.id_token), access = claimsOf(tokens.access_token);
          const rows = Object.entries(userinfo).map(([k, v]) => `<tr><th>${escape(k)}</th><td id="claim-${escape(k)}">${escape(Array.isArray(v) ? v.join(", ") : (typeof v === "object" ? JSON.stringify(v) : v))}</td></tr>`).join("");
          const level = stepUps[access.idp];
          show(`<h2 id="welcome">Bonjour ${escape(userinfo.given_name || userinfo.sub)}</h2><table id="claims">${rows}</table>
            <p>acr: <code id="acr">${escape(idToken.acr || "")}</code> · provider: <code id="idp">${escape(access.idp)}</code>
            · token_type: <code id="token-type">${escape(tokens.token_type)}</code> · attested: <code id="attested-by">${escape(access.attested || "no")}</code>
            ${access.cnf ? `· bound to key <code id="jkt">${escape(access.cnf.jkt)}</code>` : ""}</p>
            ${level ? `<p>Une démarche sensible demande le niveau <code>${escape(level)}</code> :</p>${document.getElementById("step-up-template").innerHTML}` : ""}
            <div class="actions">
              <button id="refresh">Rafraîchir les jetons</button> <span id="refresh-result"></span>
              <button id="open-web">Ouvrir une page web connectée</button>
              <label>Autoriser un appareil : <input id="approve-code" placeholder="BCDF-GHJK" size="10"></label>
              <button id="approve-device">Autoriser</button> <span id="approve-result"></span>
              <button id="sign-out">Se déconnecter</button>
            </div>
            <details><summary>Token response</summary><pre>${escape(JSON.stringify(tokens, null, 2))}</pre></details>
            <p><a href="/demo/" id="restart">Recommencer</a></p>`);
          // RFC 9470: sign in again at the level asked; Relais goes to the step-up provider and keeps
          // the session only for the same person.
          if (level) document.getElementById("step-up").onclick = () => signIn(access.idp, {acr_values: level, id_token_hint: tokens.id_token});
          document.getElementById("refresh").onclick = async () => {
            const current = load();
            const answer = await tokenRequest(current, {grant_type: "refresh_token", refresh_token: current.tokens.refresh_token});
            const result = document.getElementById("refresh-result");
            if (!answer.access_token) { result.textContent = `${answer.error}: ${answer.error_description}`; return; }
            current.tokens = {...current.tokens, ...answer};
            current.refreshes = (current.refreshes || 0) + 1;
            save(current);
            result.textContent = `Jetons rafraîchis (${current.refreshes}) : valables jusqu’à ${new Date(claimsOf(answer.access_token).exp * 1000).toLocaleTimeString("fr-FR")}`;
          };
          // A session code turns the app's tokens into a web session in the webview (here, this tab).
          document.getElementById("open-web").onclick = async () => {
            const issued = await (await withToken(load(), "POST", "/session_code")).json();
            if (!issued.session_uri) { failure("/session_code: ", issued); return; }
            location.assign(issued.session_uri);
          };
          // Sign-in on another device: the code (or QR) shown on a desktop, approved with this app's tokens.
          document.getElementById("approve-device").onclick = async () => {
            const body = new URLSearchParams({user_code: document.getElementById("approve-code").value});
            const answer = await (await withToken(load(), "POST", "/device/approve", {body})).json();
            document.getElementById("approve-result").textContent = answer.approved ? `${answer.client_id} autorisé` : `${answer.error}: ${answer.error_description}`;
          };
          // RP-initiated logout: Relais ends its session and the provider's, then comes back here.
          document.getElementById("sign-out").onclick = () => {
            const current = load(), state = random(16);
            save({signOutState: state});
            location.assign("/logout?" + new URLSearchParams({client_id: clientId, post_logout_redirect_uri: issuer + "/demo/", state, id_token_hint: current.tokens.id_token}));
          };
        };
        (async () => {
          const query = new URLSearchParams(location.search);
          const saved = load();
          if (!location.pathname.endsWith("/callback")) {
            if (query.get("state") && query.get("state") === saved.signOutState) { document.getElementById("signed-out").hidden = false; save({}); }
            // Still signed in (back from a web page, a cancelled or refused step-up): the session as it is.
            if (saved.tokens && saved.userinfo) { document.getElementById("start").hidden = true; render(saved); }
            return;
          }
          document.getElementById("start").hidden = true;
          if (query.get("error")) { failure("", {error: query.get("error"), error_description: query.get("error_description")}); return; }
          if (query.get("state") !== saved.state) { show(`<p class="error" id="error">state mismatch</p>`); return; }
          const tokens = await tokenRequest(saved, {grant_type: "authorization_code", code: query.get("code"), redirect_uri: redirectUri, code_verifier: saved.verifier});
          if (!tokens.access_token) { failure("", tokens); return; }
          if (claimsOf(tokens.id_token).nonce !== saved.nonce) { show(`<p class="error" id="error">nonce mismatch</p>`); return; }
          saved.tokens = tokens;
          const response = await withToken(saved, "GET", "/userinfo");
          if (!response.ok) { show(`<p class="error" id="error">/userinfo: ${escape(response.headers.get("WWW-Authenticate") || response.status)}</p>`); return; }
          saved.userinfo = await response.json();
          save(saved);
          history.replaceState(null, "", "/demo/callback");
          render(saved);
        })();
        """#
}
