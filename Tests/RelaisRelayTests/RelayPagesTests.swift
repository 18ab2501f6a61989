import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisConfig
@testable import RelaisRelay
import RelaisServer
import Testing

/// Relais' pages for people: one language per page (French by default, English when the browser or
/// the app asks), the operator's look, a label on every field, errors announced.
@Suite struct RelayPagesTests {
    typealias Route = RelayRouteTests
    static let acceptLanguage = HTTPField.Name("Accept-Language")!

    @Test(arguments: [
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
        let read = try await ConfigurationLoader.load(filePath: yaml, environment: ["RELAIS_SERVER_ENVIRONMENT": "development"]).pages
        #expect(read.primaryColor == "#123abc" && read.template != nil)
        let custom = Route.Fixture { $0.pages = read }
        try await custom.test { client in
            let (_, page) = try await Self.get(client, "/device")
            #expect(page.hasPrefix(#"<html lang="en"><title>Connect a device — Relais</title><body class="mine">"#), "\(page.prefix(120))")
            #expect(page.contains("{{unknown}}"), "an unknown slot stays as text")
        }
    }
}
