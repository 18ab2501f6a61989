extension ValueReader {
    /// `pages.*`: the branding of Relais' own pages.
    mutating func readPages() -> PagesSettings {
        var pages = PagesSettings()
        pages.serviceName = text("pages.service_name") ?? pages.serviceName
        if pages.serviceName.utf8.count > 80 { problem("pages.service_name", "use at most 80 bytes") }
        pages.logoURL = text("pages.logo_url")
        if let logo = pages.logoURL, !(logo.hasPrefix("https://") || (logo.hasPrefix("/") && !logo.hasPrefix("//"))) {
            problem("pages.logo_url", "expected an https URL or a path on Relais' host, got '\(logo)'")
        }
        if let color = text("pages.primary_color") {
            let digits = color.utf8.dropFirst()
            if color.hasPrefix("#"), digits.count == 3 || digits.count == 6, digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) }) {
                pages.primaryColor = color
            } else {
                problem("pages.primary_color", "expected #rgb or #rrggbb, got '\(color)'")
            }
        }
        pages.supportURL = text("pages.support_url")
        if let support = pages.supportURL,
            !(support.hasPrefix("https://") || support.hasPrefix("mailto:") || ["127.0.0.1", "[::1]"].contains(RedirectURIRules.loopbackHost(support)))
        {
            problem("pages.support_url", "expected an https or mailto: URL, got '\(support)'")
        }
        pages.defaultLanguage = choice("pages.default_language", default: pages.defaultLanguage)
        if let path = text("pages.template_file") {
            switch ConfigurationLoader.readFile(path) {
            case .success(let contents):
                if contents.contains("{{content}}") { pages.template = contents } else { problem("pages.template_file", "the template has no {{content}}") }
            case .failure(let failure): problem("pages.template_file", failure.message)
            }
        }
        return pages
    }
}
