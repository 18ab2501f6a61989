import RelaisConfig
import RelaisServer

/// The provider's HTML, for people and for browser tests: every control has a stable `id`.
enum Pages {
    static func login(
        actionURL: String,
        client: String,
        identities: [TestIdentity],
        signedInAs: TestIdentity?,
        mode: DevProviderConfiguration.Mode
    ) -> String {
        var body = "<h1 id=\"title\">Connexion — fournisseur d'identité de développement</h1>\n"
        body += "<p id=\"imitates\">Ce fournisseur de développement imite <strong>\(imitated(mode))</strong>. Les identités ci-dessous sont fictives.</p>\n"
        body += "<p>Service : <strong id=\"client\">\(HTMLText.escape(client))</strong></p>\n"
        body += "<form method=\"post\" action=\"\(HTMLText.escape(actionURL))\" id=\"login-form\">\n"
        if let signedInAs {
            body += "<p id=\"session\">Déjà connecté·e : \(HTMLText.escape(displayName(signedInAs)))</p>\n"
            body += "<button type=\"submit\" name=\"identity\" value=\"\(HTMLText.escape(signedInAs.id))\" id=\"continue\" class=\"primary\">Continuer</button>\n"
            body += "<h2>Ou choisir une autre identité</h2>\n"
        } else {
            body += "<h2>Choisissez une identité de test</h2>\n"
        }
        body += "<ul id=\"identities\">\n"
        for identity in identities {
            let id = HTMLText.escape(identity.id)
            let details = [identity.claims["birthdate"], identity.claims["email"], identity.claims["organizational_unit"]].compactMap { $0 }.map(HTMLText.escape)
                .joined(separator: " · ")
            body +=
                "<li><button type=\"submit\" name=\"identity\" value=\"\(id)\" id=\"identity-\(id)\">\(HTMLText.escape(displayName(identity)))</button> <small>\(details)</small></li>\n"
        }
        body += "</ul>\n"
        body += "<button type=\"submit\" name=\"cancel\" value=\"1\" id=\"cancel\" class=\"secondary\">Annuler et revenir au service</button>\n"
        body += "</form>\n"
        return page(title: "Connexion", body: body)
    }

    static func error(code: String, message: String) -> String {
        page(
            title: "Erreur \(code)",
            body: """
                <h1>Une erreur est survenue</h1>
                <p>Code : <strong id="error-code">\(HTMLText.escape(code))</strong></p>
                \(messageParagraph(message))
                <p>Revenez au service et réessayez. Ce fournisseur est un outil de développement de Relais.</p>
                """
        )
    }

    /// After a logout that named no `post_logout_redirect_uri`: nowhere to send the person back.
    static func signedOut() -> String {
        page(
            title: "Déconnexion",
            body: """
                <h1 id="signed-out">Vous êtes déconnecté</h1>
                <p>Votre session sur ce fournisseur d'identité est terminée. Vous pouvez fermer cette page.</p>
                """
        )
    }

    /// The provider a mode imitates, in words a newcomer knows (not the configuration's `fcplus`).
    static func imitated(_ mode: DevProviderConfiguration.Mode) -> String {
        switch mode {
        case .v2: "FranceConnect (eIDAS faible)"
        case .v1: "FranceConnect, ancienne version v1 (eIDAS faible)"
        case .fcplus: "FranceConnect+ (eIDAS substantiel)"
        case .proconnect: "ProConnect"
        }
    }

    /// The provider's error sentences are written in English where they are raised; the page is
    /// French, so each known one is said in French, and any other is marked `lang="en"` (a quoted
    /// English passage, read with the right voice by a screen reader).
    static let frenchMessages: [String: String] = [
        "The request parameters cannot be read.": "Les paramètres de la demande sont illisibles.",
        "The login form cannot be read.": "Le formulaire de connexion est illisible.",
        "Choose one of the listed identities.": "Choisissez une des identités proposées.",
        "This agent does not sign in with the identity provider the service named.":
            "Cet agent ne se connecte pas avec le fournisseur d'identité demandé par le service.",
        "This sign-in has expired or was already completed. Start again from the service.":
            "Cette connexion a expiré ou est déjà terminée. Recommencez depuis le service.",
        "The logout parameters cannot be read.": "Les paramètres de la déconnexion sont illisibles.",
        "The id_token_hint parameter is missing.": "Le paramètre id_token_hint est absent.",
        "The client_id parameter is missing.": "Le paramètre client_id est absent.",
        "No service provider is registered with this client_id.": "Aucun fournisseur de service n'est enregistré avec ce client_id.",
        "The redirect_uri parameter is missing.": "Le paramètre redirect_uri est absent.",
        "This redirect_uri is not registered for the service provider.": "Cette redirect_uri n'est pas enregistrée pour ce fournisseur de service.",
    ]

    static func messageParagraph(_ message: String) -> String {
        if let french = frenchMessages[message] { return #"<p id="error-message">\#(HTMLText.escape(french))</p>"# }
        let isFrench = message.hasPrefix("Une erreur") || message.hasPrefix("Le ") || message.hasPrefix("La ") || message.hasPrefix("Les ")
        return #"<p id="error-message"\#(isFrench ? "" : #" lang="en""#)>\#(HTMLText.escape(message))</p>"#
    }

    static func displayName(_ identity: TestIdentity) -> String {
        "\(identity.claims["given_name"] ?? "") \(identity.claims["family_name"] ?? identity.claims["usual_name"] ?? "")"
    }

    private static func page(title: String, body: String) -> String {
        """
        <!doctype html>
        <html lang="fr">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(HTMLText.escape(title))</title>
        <style>
        body { font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; color: #161616; }
        h1 { font-size: 1.4rem; color: #000091; }
        ul { list-style: none; padding: 0; }
        li { margin: .5rem 0; }
        button { font-size: 1rem; padding: .6rem 1rem; border: 1px solid #000091; background: #fff; color: #000091; cursor: pointer; }
        button.primary { background: #000091; color: #fff; }
        button.secondary { border-color: #666; color: #666; margin-top: 1rem; }
        small { color: #666; }
        </style>
        </head>
        <body>
        <main>
        \(body)
        </main>
        </body>
        </html>
        """
    }
}
