import Hummingbird
import RelaisConfig
import RelaisJOSE
import RelaisServer

/// `GET /demo/desktop` (development only): a page that plays a desktop or a kiosk signing in with
/// the phone (RFC 8628). It asks Relais for a device code, shows the QR code and the user code,
/// polls `/token` as the RFC says (adding 5 s on `slow_down`), then shows whom it signed in.
/// Served for the first app registered with `device_grant`.
struct DemoDesktopRoutes: RelayRoutes {
    let apps: [AppSettings]

    static let path = "/demo/desktop"

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        guard let app = apps.first(where: { $0.deviceGrant != nil }) else { return }
        let page = Self.page(clientID: app.clientID)
        router.get(RouterPath(Self.path)) { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"], body: .init(byteBuffer: .init(string: page)))
        }
    }

    static func page(clientID: String) -> String {
        let client = DemoAppRoutes.jsString(clientID)
        return """
            <!doctype html>
            <html lang="fr"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Relais — ordinateur de démonstration</title>
            <style>
            body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#161616;line-height:1.5}
            h1{font-size:1.5rem;color:#000091} h2{font-size:1.25rem} #user-code{font-size:1.6rem;letter-spacing:.15rem} .error{color:#ce0500}
            #qr{max-width:100%;height:auto} .notice{background:#e8edff;padding:.6rem}
            .btn{font:inherit;min-height:2.5rem;padding:.5rem 1rem;border:0;background:#000091;color:#f5f5fe;cursor:pointer}
            .btn:hover{background:#1212ff} .btn:focus-visible,a:focus-visible{outline:2px solid #0a76f6;outline-offset:2px}
            </style></head><body>
            <h1>Ordinateur de démonstration</h1>
            <p lang="en">This page plays a desktop that signs in with the phone: scan the QR code with the phone (or open
            <a id="verification-link" href="#">the link</a> on it), or type the code in the signed-in demo app's
            <em lang="fr">Autoriser un appareil</em>.</p>
            <div id="waiting"><p><img id="qr" alt="QR code à scanner avec le téléphone" width="256" height="256"></p>
            <p>Code : <strong id="user-code">…</strong></p>
            <p id="expires"></p></div>
            <p id="status" role="status" aria-live="polite">En attente…</p>
            <div id="result"></div>
            <script>
            const clientId = \(client);
            const show = html => { document.getElementById("result").innerHTML = html; };
            const say = text => { document.getElementById("status").textContent = text; };
            const escape = text => String(text).replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\\"":"&quot;","'":"&#39;"})[c]);
            const post = async (path, fields) => (await fetch(path, {method: "POST", body: new URLSearchParams(fields)})).json();
            const clock = date => date.toLocaleTimeString("fr-FR", {hour: "2-digit", minute: "2-digit"});
            // A request that ends (refused, expired, failed) leaves a way to start again: a new code.
            const ended = (id, text, error) => {
              document.getElementById("waiting").hidden = true;
              say("");
              show(`<p id="${id}" class="${error ? "error" : "notice"}"${error ? ' role="alert"' : ""}>${escape(text)}</p>
                <p><button id="desktop-restart" class="btn">Recommencer avec un nouveau code</button></p>`);
              document.getElementById("desktop-restart").onclick = () => { show(""); start(); };
            };
            const start = async () => {
              document.getElementById("waiting").hidden = false;
              document.getElementById("user-code").textContent = "…";
              document.getElementById("expires").textContent = "";
              say("En attente…");
              const started = await post("/device_authorization", {client_id: clientId, device_name: "Ordinateur de démonstration"});
              if (!started.device_code) { ended("error", `${started.error}: ${started.error_description}`, true); return; }
              const expiresAt = Date.now() + started.expires_in * 1000;
              document.getElementById("qr").src = "/device/qr.svg?user_code=" + encodeURIComponent(started.user_code);
              document.getElementById("user-code").textContent = started.user_code;
              document.getElementById("verification-link").href = started.verification_uri_complete;
              document.getElementById("expires").textContent = `Ce code expire à ${clock(new Date(expiresAt))} (dans ${Math.round(started.expires_in / 60)} min).`;
              let interval = started.interval;
              for (;;) {
                await new Promise(resolve => setTimeout(resolve, interval * 1000));
                if (Date.now() >= expiresAt) { ended("desktop-expired", "Le code a expiré : personne ne l’a validé à temps.", false); return; }
                const answer = await post("/token", {grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code: started.device_code, client_id: clientId});
                if (answer.error === "authorization_pending") continue;
                if (answer.error === "slow_down") { interval += 5; continue; }
                if (answer.error === "access_denied") { ended("desktop-denied", "La demande a été refusée sur le téléphone.", false); return; }
                if (answer.error === "expired_token") { ended("desktop-expired", "Le code a expiré : personne ne l’a validé à temps.", false); return; }
                if (!answer.access_token) { ended("error", `${answer.error}: ${answer.error_description}`, true); return; }
                document.getElementById("waiting").hidden = true;
                say("Connecté.");
                const userinfo = await (await fetch("/userinfo", {headers: {Authorization: "Bearer " + answer.access_token}})).json();
                show(`<h2 id="desktop-welcome">Bonjour ${escape(userinfo.given_name || userinfo.sub)}</h2>
                  <p lang="en">This desktop has its own session (<code>client_id=${escape(clientId)}</code>), for the person who approved on the phone.</p>`);
                return;
              }
            };
            start();
            </script>
            </body></html>
            """
    }
}
