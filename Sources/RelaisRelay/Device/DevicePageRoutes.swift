import HTTPTypes
import Hummingbird
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisOIDC
import RelaisQRCode
import RelaisServer

/// The person's side of a device request, in a browser (`verification_uri` and
/// `verification_uri_complete`):
/// - `GET /device[?user_code=…]`: enter (or confirm) the code shown on the device.
/// - `POST /device`: which app and which device asked, and for what; sign in to approve, or deny.
/// - `POST /device/sign-in`: the usual sign-in at the device app's provider; /callback then
///   approves the request instead of returning a code.
/// - `POST /device/deny`.
/// - `GET /device/qr.svg?user_code=…`: the QR code of `verification_uri_complete` (libqrencode),
///   for the device to show; the phone's app opens it as a universal link.
///
/// Every user-code lookup counts against the per-address (IPv6: per /64) and global limits; a wrong
/// code gets the same answer whether or not its first half is live, and changes nothing stored.
struct DevicePageRoutes: RelayRoutes {
    let issuer: String
    let apps: [String: AppSettings]
    let sessions: RelayStore
    let limiter: RateLimiter
    let starter: SignInStarter

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let page = router.surface(.page, limitedBy: limiter)
        page.get("/device") { request, _ in
            let typed = FormParameters.query(of: request)?["user_code"]
            return Self.entryPage(typed.flatMap(UserCode.init(typed:))?.display ?? "")
        }
        page.post("/device") { request, context in
            let form = try await Self.form(of: request)
            do {
                let (userCode, _, found) = try await lookUp(form, request, context: context)
                return confirmationPage(userCode, found)
            } catch let error as RelayError where error.code == .invalidUserCode {
                // A mistyped code: the form again, with what was wrong announced to screen readers,
                // and what was typed left in the field to correct (as long as the field takes).
                let typed = String((form["user_code"] ?? "").prefix(UserCode.typedLength))
                return Self.entryPage(typed, error: PageContext.now.strings.message(error), status: .badRequest)
            }
        }
        page.post("/device/sign-in") { request, context in
            try Self.fromOurPage(request, issuer: issuer)
            let (_, sid, found) = try await lookUp(request, context: context)
            // Decided already (approved from an app, or denied): no sign-in can change that.
            if try await sessions.deviceDecided(sid) { throw Self.alreadyDecided }
            guard let app = apps[found.clientID], let provider = app.providers.first else {
                throw RelayError(.unknownClient, "The device's app is no longer registered.", page: .deviceAppGone)
            }
            let signIn = AppRequest(
                clientID: found.clientID, redirectURI: "", codeChallenge: "", state: nil, scopes: found.scopes, nonce: nil, providerID: provider,
                acr: starter.providers[provider]?.settings.acrValues, forceLogin: false
            )
            return try await starter.start(signIn, deviceSID: sid, browser: request, logger: context.logger)
        }
        page.post("/device/deny") { request, context in
            try Self.fromOurPage(request, issuer: issuer)
            let (_, sid, _) = try await lookUp(request, context: context)
            // The first decision stands: "denied" is said only when this one was it.
            guard try await sessions.decideDevice(sid, .denied) else { throw Self.alreadyDecided }
            let strings = PageContext.now.strings
            return RelayResponse.html(
                .ok, title: strings[.deviceDeniedHeading],
                body: """
                    <h1 id="device-denied">\(strings[.deviceDeniedHeading])</h1><p>\(strings[.deviceDeniedText])</p>
                    """)
        }
        router.surface(.page).get("/device/qr.svg") { request, _ in
            guard let typed = FormParameters.query(of: request)?["user_code"], let userCode = UserCode(typed: typed),
                let code = QRCode(FormParameters.url(issuer + "/device", adding: [("user_code", userCode.display)]))
            else { throw RelayError(.invalidUserCode, "user_code is not a user code (XXXX-XXXX).") }
            // No lookup: the image says nothing about whether the code is live.
            return Response(
                status: .ok, headers: [.contentType: "image/svg+xml", .cacheControl: "no-store", .xContentTypeOptions: "nosniff"],
                body: .init(byteBuffer: .init(string: code.svg(title: "Code \(userCode.display)")))
            )
        }
    }

    static let alreadyDecided = RelayError(.invalidUserCode, "This device's request was already approved or refused.", page: .deviceAlreadyDecided)

    /// The confirmation page's own forms only. Another site's form naming a user code it got from
    /// its own device would otherwise send the person's browser through a sign-in that approves
    /// that device (silently, with a live session at the provider), or deny someone's request.
    private static func fromOurPage(_ request: Request, issuer: String) throws(RelayError) {
        guard SecFetchSite.isSameOrigin(request, issuer: issuer) else {
            throw RelayError(.invalidRequest, "Approve or deny the device from Relais' own page.", page: .notFromOurPage)
        }
    }

    private static func form(of request: Request) async throws -> FormParameters {
        guard let form = try await FormParameters.body(of: request, limit: 4096), form.firstRepeatedName == nil else {
            throw RelayError.invalidRequest("The form cannot be read.")
        }
        return form
    }

    private func lookUp(_ request: Request, context: RelaisRequestContext) async throws -> (UserCode, String, RelayStore.DeviceRequest) {
        try await lookUp(try await Self.form(of: request), request, context: context)
    }

    private func lookUp(_ form: FormParameters, _ request: Request, context: RelaisRequestContext) async throws -> (UserCode, String, RelayStore.DeviceRequest) {
        if let limited = await limiter.checkUserCode(request, context) { throw limited }
        guard let typed = form["user_code"], let userCode = UserCode(typed: typed) else {
            throw RelayError(.invalidUserCode, "This is not a code shown by a device: 8 letters, such as BCDF-GHJK.", page: .notAUserCode)
        }
        guard case .found(let sid, let found) = try await sessions.deviceRequest(userCode: userCode) else {
            throw RelayError(.invalidUserCode, "no device is waiting with this user code, or the code is wrong", page: .noSuchDeviceRequest)
        }
        return (userCode, sid, found)
    }

    private func confirmationPage(_ userCode: UserCode, _ found: RelayStore.DeviceRequest) -> Response {
        let strings = PageContext.now.strings
        let field = #"<input type="hidden" name="user_code" value="\#(userCode.display)">"#
        let minutes = max(1, Int((found.expiresAt - sessions.clock.now) / 60))
        // What Relais knows first (the app's configured name, when and from where); the device's own
        // label last, marked as its words: anyone can write anything there.
        let name = #"<strong id="device-app-name">\#(HTMLText.escape(apps[found.clientID]?.name ?? found.clientID))</strong>"#
        let asks = strings.format(
            .deviceAsks,
            name, #"<code id="device-app">\#(HTMLText.escape(found.clientID))</code>"#,
            #"<code id="device-scope">\#(HTMLText.escape(found.scopes.joined(separator: " ")))</code>"#
        )
        var context = ""
        if let at = found.requestedAt {
            let seconds = Int(at) % 86_400
            let twoDigits = { (value: Int) in value < 10 ? "0\(value)" : "\(value)" }
            context = strings.format(.deviceRequestedAt, #"<span id="device-time">\#(twoDigits(seconds / 3600)):\#(twoDigits(seconds % 3600 / 60))</span>"#)
            if let address = found.requesterAddress { context += " " + strings.format(.deviceRequestedFrom, #"<code id="device-address">\#(HTMLText.escape(address))</code>"#) }
            context += "."
        }
        let device = found.device.map { "<p>" + strings.format(.deviceOwnName, #"<span id="device-name">\#(HTMLText.escape($0))</span>"#) + "</p>" } ?? ""
        return RelayResponse.html(
            .ok, title: strings[.deviceTitle],
            body: """
                <h1>\(strings[.deviceTitle])</h1>
                <p>\(asks) \(context)</p>
                \(device)
                <p>\(strings.format(.deviceCheckCode, "<strong>\(userCode.display)</strong>", String(minutes)))</p>
                <form method="post" action="/device/sign-in">\(field)<button id="device-sign-in">\(strings[.deviceSignInToApprove])</button></form>
                <form method="post" action="/device/deny">\(field)<button id="device-deny" class="secondary">\(strings[.deviceDeny])</button></form>
                """)
    }

    /// The code form: its field labelled, and an error (after a mistyped code) announced as an alert.
    static func entryPage(_ code: String, error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        let strings = PageContext.now.strings
        let alert = error.map { #"<p id="device-error" class="error" role="alert">\#(HTMLText.escape($0))</p>"# } ?? ""
        let invalid = error == nil ? "" : #" aria-invalid="true" aria-describedby="device-error""#
        return RelayResponse.html(
            status, title: strings[.deviceTitle],
            body: """
                <h1>\(strings[.deviceTitle])</h1>
                <p>\(strings[.deviceEntryIntro])</p>
                \(alert)
                <form method="post" action="/device">
                <label for="user-code">\(strings[.deviceCodeLabel])</label>
                <input id="user-code" name="user_code" value="\(HTMLText.escape(code))" autocomplete="off" autocapitalize="characters" maxlength="\(UserCode.typedLength)"\(invalid)>
                <button id="device-continue">\(strings[.continueButton])</button>
                </form>
                """)
    }
}
