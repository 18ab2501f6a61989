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

    func register(on router: Router<RelaisRequestContext>) {
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
            body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#161616}
            h1{font-size:1.4rem;color:#000091} #user-code{font-size:1.6rem;letter-spacing:.15rem} .error{color:#b00}
            </style></head><body>
            <h1>Ordinateur de démonstration</h1>
            <p>This page plays a desktop that signs in with the phone: scan the QR code with the phone (or open
            <a id="verification-link" href="#">the link</a> on it), or type the code in the signed-in demo app's
            <em>Autoriser un appareil</em>.</p>
            <div id="waiting"><p><img id="qr" alt="QR code" width="256" height="256"></p>
            <p>Code : <strong id="user-code">…</strong></p><p id="status">En attente…</p></div>
            <div id="result"></div>
            <script>
            const clientId = \(client);
            const show = html => { document.getElementById("result").innerHTML = html; };
            const escape = text => String(text).replace(/[&<>"']/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\\"":"&quot;","'":"&#39;"})[c]);
            const post = async (path, fields) => (await fetch(path, {method: "POST", body: new URLSearchParams(fields)})).json();
            (async () => {
              const started = await post("/device_authorization", {client_id: clientId, device_name: "Ordinateur de démonstration"});
              if (!started.device_code) { show(`<p class="error" id="error">${escape(started.error)}: ${escape(started.error_description)}</p>`); return; }
              document.getElementById("qr").src = "/device/qr.svg?user_code=" + encodeURIComponent(started.user_code);
              document.getElementById("user-code").textContent = started.user_code;
              document.getElementById("verification-link").href = started.verification_uri_complete;
              let interval = started.interval;
              for (;;) {
                await new Promise(resolve => setTimeout(resolve, interval * 1000));
                const answer = await post("/token", {grant_type: "urn:ietf:params:oauth:grant-type:device_code", device_code: started.device_code, client_id: clientId});
                if (answer.error === "authorization_pending") continue;
                if (answer.error === "slow_down") { interval += 5; continue; }
                document.getElementById("waiting").hidden = true;
                if (!answer.access_token) { show(`<p class="error" id="error">${escape(answer.error)}: ${escape(answer.error_description)}</p>`); return; }
                const userinfo = await (await fetch("/userinfo", {headers: {Authorization: "Bearer " + answer.access_token}})).json();
                show(`<h2 id="desktop-welcome">Bonjour ${escape(userinfo.given_name || userinfo.sub)}</h2>
                  <p>This desktop has its own session (<code>client_id=${escape(clientId)}</code>), for the person who approved on the phone.</p>`);
                return;
              }
            })();
            </script>
            </body></html>
            """
    }
}
