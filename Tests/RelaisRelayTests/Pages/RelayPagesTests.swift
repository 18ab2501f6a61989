import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Relais' pages for people: one language per page (French by default, English when the browser or
/// the app asks), the operator's look, a label on every field, errors announced.
@Suite(.tags(.fast)) struct RelayPagesTests {
    typealias Route = RelayRouteTests
    static let acceptLanguage = HTTPField.Name("Accept-Language")!

    @Test(
        arguments: [
            (nil, nil, PageLanguage.fr),
            (nil, "en-GB,en;q=0.9", .en),
            (nil, "de-DE, en;q=0.5, fr;q=0.4", .en),
            (nil, "en;q=0.4, fr-FR;q=0.8", .fr),
            (nil, "de, it", .fr),
            (nil, "en;q=0, fr;q=0.1", .fr),
            (nil, "en;q=2", .fr),
            (nil, "en;q=abc", .fr),
            (nil, ",,;q=,en", .en),
            ("en", "fr", .en),
            ("de en-US", nil, .en),
            ("de it", "en", .en),
        ] as [(String?, String?, PageLanguage)])
    func theLanguageIsNegotiated(uiLocales: String?, acceptLanguage: String?, expected: PageLanguage) {
        #expect(PageLanguage.negotiate(uiLocales: uiLocales, acceptLanguage: acceptLanguage, fallback: .fr) == expected)
    }

    @Test func aLongHeaderIsReadOnlyAsFarAsItsFirstEntries() {
        // 10,000 unknown entries, then English: bounded work, so English is never reached.
        let header = Array(repeating: "de", count: 10_000).joined(separator: ",") + ",en"
        #expect(PageLanguage.negotiate(uiLocales: nil, acceptLanguage: header, fallback: .fr) == .fr)
    }

    /// A translation is one file: each language has every sentence.
    @Test func everyLanguageHasEverySentence() {
        for language in PageLanguage.allCases {
            for text in PageText.allCases { #expect(language.strings.texts[text]?.isEmpty == false, "\(language) lacks \(text)") }
            for message in PageMessage.allCases { #expect(language.strings.messages[message]?.isEmpty == false, "\(language) lacks \(message)") }
        }
        #expect(PageStrings.french.format(.deviceCheckCode, "X", "3") == "Vérifiez que l'appareil affiche bien le code X. La demande expire dans 3 min.")
        #expect(PageStrings.english.format(.deviceAsks, "A", "b", "c") == "The app A (b) asks to sign in with your identity, for: c.")
    }

    static func get(_ client: any TestClientProtocol, _ uri: String, language: String? = nil) async throws -> (HTTPResponse.Status, String) {
        var headers: HTTPFields = [:]
        if let language { headers[acceptLanguage] = language }
        let response = try await client.execute(uri: uri, method: .get, headers: headers)
        return (response.status, String(buffer: response.body))
    }

    @Test func eachPageIsInOneLanguage() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let (_, french) = try await Self.get(client, "/device")
            #expect(french.contains(#"<html lang="fr">"#) && french.contains("Saisissez le code") && !french.contains("Enter the code"))
            #expect(french.contains(#"<label for="user-code">"#))
            let (_, english) = try await Self.get(client, "/device", language: "en-GB,en;q=0.9,fr;q=0.5")
            #expect(english.contains(#"<html lang="en">"#) && english.contains("Enter the code") && !english.contains("Saisissez"))
            // An error page: the sentence for people, the code and the request's id; no developer text.
            let (status, error) = try await Self.get(client, "/authorize?response_type=code", language: "en")
            #expect(status == .badRequest && error.contains(#"<html lang="en">"#) && error.contains("Signing in could not be completed"))
            #expect(error.contains(#"id="error-code""#) && error.contains(#"id="request-id""#))
            #expect(!error.contains("La connexion"))
            // The app's ui_locales comes before the browser's language.
            let (_, asked) = try await Self.get(client, "/authorize?client_id=nobody&ui_locales=en", language: "fr")
            #expect(asked.contains(#"<html lang="en">"#) && asked.contains("This app is not registered"), "\(asked)")
        }
    }

    @Test func operatorsBrandThePages() async throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("relais-template-\(UUID().uuidString).html").path
        try "<html lang=\"{{lang}}\"><title>{{title}}</title><body class=\"mine\">{{header}}{{content}}{{footer}}{{unknown}}</body></html>".write(
            toFile: template, atomically: true, encoding: .utf8
        )
        var settings = PagesSettings()
        settings.serviceName = "Mon Service <Public>"
        settings.logoURL = "https://example.fr/logo.svg"
        settings.supportURL = "https://example.fr/aide"
        settings.defaultLanguage = .en
        let fixture = Route.Fixture { $0.pages = settings }
        try await fixture.test { client in
            let (_, page) = try await Self.get(client, "/device")
            #expect(page.contains(#"<html lang="en">"#), "the operator's default language")
            #expect(page.contains("Mon Service &lt;Public&gt;") && page.contains(#"<img src="https://example.fr/logo.svg" alt="""#))
            #expect(page.contains(#"<a href="https://example.fr/aide">Need help?</a>"#))
            let (_, french) = try await Self.get(client, "/device", language: "fr")
            #expect(french.contains("Besoin d'aide ?"))
        }
        let yaml = FileManager.default.temporaryDirectory.appendingPathComponent("relais-pages-\(UUID().uuidString).yaml").path
        try "pages:\n  template_file: \(template)\n  primary_color: \"#123abc\"\n  default_language: en\n".write(toFile: yaml, atomically: true, encoding: .utf8)
        let read = try await ConfigurationLoader.load(filePath: yaml, environment: ["RELAIS_SERVER_ENVIRONMENT": "development"], generateKey: TestKeys.generator()).pages
        #expect(read.primaryColor == "#123abc" && read.template != nil)
        let custom = Route.Fixture { $0.pages = read }
        try await custom.test { client in
            let (_, page) = try await Self.get(client, "/device")
            #expect(page.hasPrefix(#"<html lang="en"><title>Connect a device — Relais</title><body class="mine">"#), "\(page.prefix(120))")
            #expect(page.contains("{{unknown}}"), "an unknown slot stays as text")
        }
    }

    /// Every page: no cache, no framing, no Referer to another host (its address may carry a session code or an
    /// id_token_hint), no sniffing; Relais' template allows its own inline style (by hash) and the
    /// logo's origin, and nothing else; an operator's template keeps what cannot break it.
    @Test func everyPageSendsNoRefererAndAllowsOnlyItsOwnStyle() async throws {
        var settings = PagesSettings()
        settings.logoURL = "https://example.fr:8443/img/logo.svg"
        let fixture = Route.Fixture { $0.pages = settings }
        try await fixture.test { client in
            for uri in ["/device", "/authorize?response_type=code", "/session?code=x"] {
                let response = try await client.execute(uri: uri, method: .get)
                let page = String(buffer: response.body)
                #expect(response.headers[.referrerPolicy] == "same-origin" && response.headers[.xContentTypeOptions] == "nosniff", "\(uri)")
                #expect(response.headers[.cacheControl] == "no-store" && response.headers[.xFrameOptions] == "DENY", "\(uri)")
                let policy = try #require(response.headers[.contentSecurityPolicy], "\(uri)")
                #expect(policy.hasPrefix("default-src 'none'; style-src 'sha256-") && policy.contains("frame-ancestors 'none'") && policy.contains("base-uri 'none'"))
                #expect(policy.contains("img-src 'self' https://example.fr:8443;"), "\(policy)")
                // The hash is the page's own <style>, as the browser computes it.
                let style = try #require(page.firstMatch(of: /<style>(.*)<\/style>/.dotMatchesNewlines())?.output.1)
                #expect(policy.contains("'sha256-\(Base64.encode(SHA256.hash(String(style))))'"), "\(uri)")
            }
        }
        #expect(PageRenderer.origin(of: "/static/logo.svg") == nil && PageRenderer.origin(of: "https://a.example/x?y") == "https://a.example")
        #expect(PageRenderer.origin(of: "https://user@a.example/x") == nil)
        #expect(Base64.encode([0xfb, 0xff]) == "+/8=")
        settings.template = "<html lang=\"{{lang}}\"><body>{{content}}</body></html>"
        let custom = Route.Fixture { $0.pages = settings }
        try await custom.test { client in
            let response = try await client.execute(uri: "/device", method: .get)
            #expect(response.headers[.contentSecurityPolicy] == "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
            #expect(response.headers[.referrerPolicy] == "same-origin")
        }
    }

    // MARK: What a machine does not see (axe-core runs in the browser e2e: e2e/test_accessibility.py)

    /// What an automatic checker cannot judge on `page`: `lang` says the page's language, every
    /// visible field has a `<label for>`, one `h1`, and heading levels never skip (h1, h2, h3...).
    static func structureProblems(_ page: String, language: PageLanguage) -> [String] {
        var problems: [String] = []
        if !page.contains(#"<html lang="\#(language.rawValue)">"#) { problems.append("the page's lang is not \(language.rawValue)") }
        for input in page.matches(of: /<(input|select|textarea)\b[^>]*>/) {
            let tag = String(input.output.0)
            if tag.contains(#"type="hidden""#) { continue }
            guard let id = tag.firstMatch(of: /\bid="([^"]+)"/)?.output.1 else {
                problems.append("a field without an id, so without a label: \(tag)")
                continue
            }
            if !page.contains(#"<label for="\#(id)">"#) { problems.append("no <label for=\"\(id)\">") }
            if tag.contains("placeholder=") { problems.append("\(id): a placeholder is not a label") }
        }
        let levels = page.matches(of: /<h([1-6])\b/).compactMap { Int($0.output.1) }
        if levels.filter({ $0 == 1 }).count != 1 { problems.append("\(levels.filter { $0 == 1 }.count) h1") }
        if levels.first != 1 { problems.append("the first heading is not the h1") }
        for (previous, next) in zip(levels, levels.dropFirst()) where next > previous + 1 {
            problems.append("h\(previous) then h\(next): a level skipped")
        }
        return problems
    }

    @Test func theStructureCheckFindsWhatItLooksFor() {
        let good = #"<html lang="fr"><h1>A</h1><h2>B</h2><h3>C</h3><h2>D</h2><label for="x">X</label><input id="x"><input type="hidden" name="h">"#
        #expect(Self.structureProblems(good, language: .fr).isEmpty)
        let bad = #"<html lang="fr"><h2>B</h2><h1>A</h1><h3>C</h3><h1>E</h1><input id="y" placeholder="code"><input name="z">"#
        #expect(Self.structureProblems(bad, language: .en).count == 7, "\(Self.structureProblems(bad, language: .en))")
    }

    /// Every page of Relais, as a person reaches it, in each language: its structure, and on the
    /// device form the mistyped code's error as an alert tied to the field.
    @Test(arguments: PageLanguage.allCases)
    func everyPageHasLabelsHeadingsInOrderAndAlerts(language: PageLanguage) async throws {
        typealias Device = RelayDeviceTests
        typealias CrossSite = RelayCrossSiteTests
        let fixture = Device.fixture { configuration in
            configuration.apps[0].webTargets = RelaySessionCodeTests.targets
            configuration.apps[0].postLogoutRedirectURIs = [CrossSite.loggedOut]
        }
        let asked: HTTPFields = [Self.acceptLanguage: language.rawValue]
        let posted: HTTPFields = {
            var headers = Route.formHeaders
            headers.append(contentsOf: asked)
            return headers
        }()
        try await fixture.test { client in
            var pages: [(String, String)] = []
            func add(_ name: String, _ response: TestResponse) {
                pages.append((name, String(buffer: response.body)))
            }
            add("/authorize error", try await client.execute(uri: "/authorize", method: .get, headers: asked))
            add("/device entry", try await client.execute(uri: "/device", method: .get, headers: asked))
            for typed in ["BCDF-GHJK", "nope"] {
                let mistyped = try await client.execute(uri: "/device", method: .post, headers: posted, body: Route.form([("user_code", typed)]))
                #expect(mistyped.status == .badRequest)
                let page = String(buffer: mistyped.body)
                #expect(page.contains(#"<p id="device-error" class="error" role="alert">"#), "the error is announced")
                #expect(page.contains(#"aria-invalid="true" aria-describedby="device-error""#), "and tied to its field")
                #expect(page.contains(#"<label for="user-code">"#), "the form is shown again")
                pages.append(("/device mistyped \(typed)", page))
            }
            let started = try await Device.start(client)
            add("/device confirmation", try await client.execute(uri: "/device", method: .post, headers: posted, body: Route.form([("user_code", started.userCode)])))
            var fromOurPage = posted
            fromOurPage[SecFetchSite.header] = "same-origin"
            add("/device denied", try await client.execute(uri: "/device/deny", method: .post, headers: fromOurPage, body: Route.form([("user_code", started.userCode)])))

            // Two people: this browser's, and the one a link would sign in instead.
            let mine = try RelaySessionCodeTests.cookie(
                try await CrossSite.open(client, try await CrossSite.code(client, try await CrossSite.tokens(fixture, client)), headers: [:]))
            let theirs = try await CrossSite.code(client, try await CrossSite.tokens(fixture, client, subject: "sub-2"))
            var withMine: HTTPFields = [CrossSite.cookieHeader: "\(RelayRouteTests.sessionCookie)=\(mine)"]
            withMine.append(contentsOf: asked)
            add("/session switch", try await CrossSite.open(client, theirs, headers: withMine))

            let idToken = try #require(try await CrossSite.tokens(fixture, client)["id_token"]?.stringValue)
            var crossSite: HTTPFields = [CrossSite.site: "cross-site"]
            crossSite.append(contentsOf: asked)
            add("/logout cross-site confirmation", try await CrossSite.logout(client, idToken: idToken, headers: crossSite))

            #expect(pages.count == 8)
            for (name, page) in pages {
                #expect(page.contains("<h1"), "\(name): not a page: \(page.prefix(300))")
                let problems = Self.structureProblems(page, language: language)
                #expect(problems.isEmpty, "\(name) (\(language)): \(problems)")
            }
        }
    }
}
