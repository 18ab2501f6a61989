import Foundation
import RelaisConfig
import Testing

@testable import RelaisDevProvider

/// The development provider's pages: in French only (`lang="fr"`), saying which provider they
/// imitate in words a newcomer knows, and built like Relais' pages (one h1, headings in order).
@Suite struct DevProviderPagesTests {
    static let identities = [TestIdentity(id: "angela", claims: ["given_name": "Angela", "family_name": "DUBOIS", "birthdate": "1962-08-24"])]

    @Test(arguments: [
        (DevProviderConfiguration.Mode.v2, "FranceConnect (eIDAS faible)"),
        (.v1, "FranceConnect, ancienne version v1 (eIDAS faible)"),
        (.fcplus, "FranceConnect+ (eIDAS substantiel)"),
        (.proconnect, "ProConnect"),
    ])
    func theLoginPageSaysWhichProviderItImitates(mode: DevProviderConfiguration.Mode, words: String) {
        for signedIn in [nil, Self.identities[0]] {
            let page = Pages.login(actionURL: "/login", client: "relais", identities: Self.identities, signedInAs: signedIn, mode: mode)
            #expect(page.contains(#"<html lang="fr">"#))
            #expect(page.contains("imite <strong>\(words)</strong>"), "\(page)")
            // Words a newcomer knows, not the configuration's name.
            #expect(!page.contains("mode \(mode.rawValue)") && !page.contains("· mode"))
            #expect(page.components(separatedBy: "<h1").count == 2, "one h1")
            #expect(!page.contains("<h3"), "no level skipped after the h2")
        }
    }

    @Test func errorsAreSaidInFrenchOrMarkedEnglish() {
        let known = Pages.error(code: "Y030007", message: "The client_id parameter is missing.")
        #expect(known.contains(#"<p id="error-message">Le paramètre client_id est absent.</p>"#))
        #expect(known.contains(#"<html lang="fr">"#) && known.components(separatedBy: "<h1").count == 2)
        let french = Pages.error(code: "Y030007", message: "Une erreur technique est survenue : le paramètre nonce est absent.")
        #expect(french.contains(#"<p id="error-message">Une erreur"#))
        let other = Pages.error(code: "DP_INJECTED_FAILURE", message: "Injected failure: HTTP 500.")
        #expect(other.contains(#"<p id="error-message" lang="en">Injected failure: HTTP 500.</p>"#))
        #expect(Pages.frenchMessages.keys.allSatisfy { Pages.frenchMessages[$0]?.isEmpty == false })
    }
}
