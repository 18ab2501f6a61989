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
            id: "step-up", brand: .franceConnectPlus, link: "https://franceconnect.gouv.fr/france-connect-plus", question: "Qu’est-ce que FranceConnect+ ?",
            attributes: ""
        )
        return #"""
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — application de démonstration</title>
            <style>\#(DSFRConnect.tokens)
            \#(DSFRConnect.css)
            \#(Self.style)</style></head><body>
            <h1>Application de démonstration</h1>
            <p class="lead" lang="en">This page plays the mobile app: an OAuth 2.0 sign-in with PKCE at Relais
            (<code>client_id=\#(HTMLText.escape(clientID))</code>), the code exchange, then <code>/userinfo</code>.</p>
            <p id="signed-out" class="notice" hidden>Vous êtes déconnecté·e, de Relais et du fournisseur.</p>
            <div id="status" role="status" aria-live="polite"></div>
            <div id="start">
              <h2>Se connecter</h2>
              \#(mobile ? #"<p><input type="checkbox" id="attested"> <label for="attested" lang="en">As an attested app (development attester)</label></p>"# : "")
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

    /// The brands of the DSFR's connect component, each with its own logo (DSFRConnect.css).
    enum Brand {
        case franceConnect, franceConnectPlus, proConnect

        var classes: String {
            switch self {
            case .franceConnect: "fr-connect"
            case .franceConnectPlus: "fr-connect fr-connect--plus"
            case .proConnect: "fr-connect fr-connect--pro"
            }
        }

        /// The brand as the button writes it; FranceConnect+'s "+" is drawn by the component, and
        /// said to screen readers by a hidden "+".
        var label: String {
            switch self {
            case .franceConnect: "FranceConnect"
            case .franceConnectPlus: #"FranceConnect<span class="sr-only">+</span>"#
            case .proConnect: "ProConnect"
            }
        }
    }

    /// The DSFR's button: "S’identifier avec" and the brand, a link below that explains it.
    static func connectButton(_ provider: ProviderSettings, id: String) -> String {
        let attributes = #" data-provider="\#(HTMLText.escape(provider.id))""#
        switch provider.preset {
        case .franceconnectV2, .franceconnectV1:
            return connectGroup(id: id, brand: .franceConnect, link: "https://franceconnect.gouv.fr/", question: "Qu’est-ce que FranceConnect ?", attributes: attributes)
        case .franceconnectPlus:
            return connectGroup(
                id: id, brand: .franceConnectPlus, link: "https://franceconnect.gouv.fr/france-connect-plus", question: "Qu’est-ce que FranceConnect+ ?",
                attributes: attributes
            )
        case .proconnect:
            return connectGroup(id: id, brand: .proConnect, link: "https://www.proconnect.gouv.fr/", question: "Qu’est-ce que ProConnect ?", attributes: attributes)
        default:
            return #"<p><button class="btn btn--secondary plain" id="\#(HTMLText.escape(id))"\#(attributes)>Se connecter avec \#(HTMLText.escape(provider.id))</button></p>"#
        }
    }

    /// The component's markup, as the DSFR documents it.
    static func connectGroup(id: String, brand: Brand, link: String, question: String, attributes: String) -> String {
        #"""
        <div class="fr-connect-group">
          <button class="\#(brand.classes)" id="\#(HTMLText.escape(id))"\#(attributes)>
            <span class="fr-connect__login">S’identifier avec</span>
            <span class="fr-connect__brand">\#(brand.label)</span>
          </button>
          <p><a href="\#(link)" target="_blank" rel="noopener" title="\#(question) - nouvelle fenêtre">\#(question)</a></p>
        </div>
        """#
    }

    // Readable from 320 px wide: one column, buttons at full width on small screens. The DSFR's
    // colours: blue France #000091 for actions, grey #161616 for text, #ce0500 for errors.
    private static let style = #"""
        body{font-family:system-ui,sans-serif;max-width:42rem;margin:1.5rem auto;padding:0 1rem;color:#161616;line-height:1.5}
        h1{font-size:1.5rem;color:#000091} h2{font-size:1.25rem} h3{font-size:1.1rem;margin:1.5rem 0 .5rem} .lead{color:#3a3a3a}
        .sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0}
        .btn{font:inherit;min-height:2.5rem;padding:.5rem 1rem;border:0;background:#000091;color:#f5f5fe;cursor:pointer;text-align:left}
        .btn:hover{background:#1212ff} .btn:active{background:#2323ff}
        .btn--secondary{background:transparent;color:#000091;box-shadow:inset 0 0 0 1px #000091}
        .btn--secondary:hover{background:rgba(0,0,145,.06)} .btn--secondary:active{background:rgba(0,0,145,.12)}
        .btn:focus-visible,.fr-connect:focus-visible,input:focus-visible,a:focus-visible{outline:2px solid #0a76f6;outline-offset:2px}
        .actions{display:flex;flex-wrap:wrap;gap:.75rem;margin:1rem 0}
        .field label{display:block;margin-bottom:.25rem} .field input{font:inherit;box-sizing:border-box;padding:.5rem;border:0;border-bottom:2px solid #3a3a3a;background:#eee;width:10rem}
        .field{display:flex;flex-wrap:wrap;align-items:flex-end;gap:.75rem} .field div{flex:0 1 auto}
        .request{border-left:4px solid #000091;padding:.25rem 0 .25rem 1rem;margin:1rem 0} .result{font-size:.9rem;margin:.5rem 0}
        .theirs{font-style:italic}
        table{border-collapse:collapse;margin:1rem 0;width:100%;table-layout:fixed} td,th{border:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
        th{width:40%;overflow-wrap:break-word;word-break:normal;hyphens:manual} td{overflow-wrap:anywhere}
        code{overflow-wrap:anywhere} pre{background:#f4f4f4;padding:.6rem;overflow:auto;font-size:.75rem}
        .error{color:#ce0500} .notice{background:#e8edff;padding:.6rem}
        @media (max-width:480px){.btn{width:100%} .field div,.field input{width:100%}
          #claims th,#claims td{display:block;width:auto} #claims th{border-bottom:0;padding-bottom:0;font-size:.875rem;color:#3a3a3a}}
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
        const notice = html => { document.getElementById("status").innerHTML = html; };
        // After a failed step-up the app is still signed in: "Retour" shows its session again.
        const failure = (what, answer) => show(`<p class="error" id="error" role="alert">${escape(what)}${escape(answer.error || "")}: ${escape(answer.error_description || "")}</p>
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
        // A claim's name breaks only after its underscores (preferred_<wbr>username), never inside a word.
        const claimName = name => escape(name).replace(/_/g, "_<wbr>");
        const claimValue = v => escape(Array.isArray(v) ? v.join(", ") : (typeof v === "object" ? JSON.stringify(v) : v));
        const clock = seconds => new Date(seconds * 1000).toLocaleTimeString("fr-FR", {hour: "2-digit", minute: "2-digit"});
        const render = saved => {
          const tokens = saved.tokens, userinfo = saved.userinfo, idToken = claimsOf(tokens.id_token), access = claimsOf(tokens.access_token);
          const rows = Object.entries(userinfo).map(([k, v]) => `<tr><th scope="row">${claimName(k)}</th><td id="claim-${escape(k)}">${claimValue(v)}</td></tr>`).join("");
          const level = stepUps[access.idp];
          show(`<h2 id="welcome">Bonjour ${escape(userinfo.given_name || userinfo.sub)}</h2>
            <table id="claims"><caption class="sr-only">L’identité reçue de /userinfo</caption>${rows}</table>
            <p>acr: <code id="acr">${escape(idToken.acr || "")}</code> · provider: <code id="idp">${escape(access.idp)}</code>
            · token_type: <code id="token-type">${escape(tokens.token_type)}</code> · attested: <code id="attested-by">${escape(access.attested || "no")}</code>
            ${access.cnf ? `· bound to key <code id="jkt">${escape(access.cnf.jkt)}</code>` : ""}</p>
            ${level ? `<p>Une démarche sensible demande le niveau <code>${escape(level)}</code> :</p>${document.getElementById("step-up-template").innerHTML}` : ""}
            <div class="actions">
              <button id="refresh" class="btn">Rafraîchir les jetons</button>
              <button id="open-web" class="btn">Ouvrir une page web connectée</button>
            </div>
            <p id="refresh-result" class="result" role="status" aria-live="polite"></p>
            <h3 id="approve-heading">Autoriser un appareil</h3>
            <form id="approve-form" class="field" aria-labelledby="approve-heading">
              <div><label for="approve-code">Code affiché par l’appareil (8 lettres, par exemple BCDF-GHJK)</label>
              <input id="approve-code" name="user_code" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="9"></div>
              <div><button id="approve-device" class="btn">Voir la demande</button></div>
            </form>
            <div id="approve-request" aria-live="polite"></div>
            <p id="approve-result" class="result" role="status" aria-live="polite"></p>
            <div class="actions"><button id="sign-out" class="btn btn--secondary">Se déconnecter</button></div>
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
          // Sign-in on another device: the code (or QR) shown on a desktop. As a real app must, the
          // page first shows Relais' description of the request (/device/inspect): which app, when,
          // from where, and last the device's own words about itself; the person then approves or refuses.
          document.getElementById("approve-form").onsubmit = async event => {
            event.preventDefault();
            const code = document.getElementById("approve-code").value.trim();
            const request = document.getElementById("approve-request"), result = document.getElementById("approve-result");
            request.innerHTML = ""; result.textContent = "";
            const asked = await (await withToken(load(), "POST", "/device/inspect", {body: new URLSearchParams({user_code: code})})).json();
            if (!asked.client_id) { result.textContent = `${asked.error}: ${asked.error_description}`; return; }
            const when = asked.requested_at ? ` à <span id="approve-time">${escape(clock(asked.requested_at))}</span>` : "";
            const where = asked.requester_address ? ` depuis l’adresse <code id="approve-address">${escape(asked.requester_address)}</code>` : "";
            request.innerHTML = `<div class="request" id="approve-description">
              <p><strong id="approve-app-name">${escape(asked.app_name)}</strong> (<code id="approve-client">${escape(asked.client_id)}</code>)
              demande à ouvrir une session à votre nom (<code id="approve-scope">${escape(asked.scope)}</code>).</p>
              ${when || where ? `<p id="approve-context">Demande faite${when}${where}.</p>` : ""}
              ${asked.device ? `<p>L’appareil se présente ainsi, avec ses propres mots (Relais ne les vérifie pas) :
                <span class="theirs">« <span id="approve-device-name">${escape(asked.device)}</span> »</span></p>` : ""}
              <p>N’autorisez que si vous venez de demander cette connexion sur cet appareil et qu’il affiche le code <strong>${escape(code.toUpperCase())}</strong>.
              La demande expire dans ${Math.max(1, Math.ceil(asked.expires_in / 60))} min.</p>
              <div class="actions"><button id="approve-confirm" class="btn">Autoriser cet appareil</button>
              <button id="approve-deny" class="btn btn--secondary">Refuser</button></div></div>`;
            const decide = async decision => {
              const body = new URLSearchParams({user_code: code, decision});
              const answer = await (await withToken(load(), "POST", "/device/approve", {body})).json();
              request.innerHTML = "";
              result.textContent = answer.error ? `${answer.error}: ${answer.error_description}`
                : answer.approved ? `${answer.app_name} autorisé` : `Demande de ${answer.app_name} refusée`;
            };
            document.getElementById("approve-confirm").onclick = () => decide("approve");
            document.getElementById("approve-deny").onclick = () => decide("deny");
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
          const saved = load(), signedIn = Boolean(saved.tokens && saved.userinfo), start = document.getElementById("start");
          // /demo/, or /demo/callback reloaded after a sign-in (history.replaceState dropped its code
          // and state): the session as sessionStorage keeps it, or the buttons.
          if (!location.pathname.endsWith("/callback") || !(query.has("code") || query.has("error"))) {
            if (query.get("state") && query.get("state") === saved.signOutState) { document.getElementById("signed-out").hidden = false; save({}); return; }
            // Still signed in (back from a web page, a cancelled or refused step-up, a reload): the session as it is.
            if (signedIn) { start.hidden = true; render(saved); }
            return;
          }
          start.hidden = true;
          const answered = query.get("state") && query.get("state") === saved.state;
          // The person cancelled at the provider: nothing went wrong, the app is where it was.
          if (answered && query.get("error") === "access_denied") {
            delete saved.state;
            save(saved);
            history.replaceState(null, "", "/demo/");
            notice(`<p id="cancelled" class="notice">Connexion annulée${signedIn ? " : vous restez connecté·e comme avant." : ". Vous pouvez choisir à nouveau comment vous connecter."}</p>`);
            if (signedIn) render(saved); else start.hidden = false;
            return;
          }
          if (query.get("error")) { failure("", {error: query.get("error"), error_description: query.get("error_description")}); return; }
          if (!answered) { failure("", {error: "state mismatch", error_description: "this answer is for no sign-in in progress"}); return; }
          const tokens = await tokenRequest(saved, {grant_type: "authorization_code", code: query.get("code"), redirect_uri: redirectUri, code_verifier: saved.verifier});
          // The code is spent: a reload of this URL is no sign-in in progress.
          delete saved.state;
          if (!tokens.access_token) { save(saved); failure("", tokens); return; }
          if (claimsOf(tokens.id_token).nonce !== saved.nonce) { save(saved); failure("", {error: "nonce mismatch"}); return; }
          saved.tokens = tokens;
          const response = await withToken(saved, "GET", "/userinfo");
          if (!response.ok) { show(`<p class="error" id="error" role="alert">/userinfo: ${escape(response.headers.get("WWW-Authenticate") || response.status)}</p>`); return; }
          saved.userinfo = await response.json();
          save(saved);
          history.replaceState(null, "", "/demo/callback");
          render(saved);
        })();
        """#
}
