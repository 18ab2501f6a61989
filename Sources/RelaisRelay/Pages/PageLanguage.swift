import RelaisConfig

/// The language of a page Relais shows people: French by default (the service's own default may
/// say otherwise), English when the browser or the app asks for it. A page is in one language.
enum PageLanguage: String, Sendable, CaseIterable {
    case fr, en

    /// The strings of this language: one catalogue per language (`PageStrings+French.swift`, ...).
    var strings: PageStrings {
        switch self {
        case .fr: .french
        case .en: .english
        }
    }

    /// OpenID Connect's `ui_locales` (preference order, space-separated) first, then
    /// `Accept-Language` (RFC 9110 §12.5.4: the highest `q`, the first listed among equals);
    /// `fallback` when neither names a language Relais has. Reads at most 32 entries of each, so
    /// the work is bounded whatever a client sends; an unreadable entry is skipped, never trusted.
    static func negotiate(uiLocales: String?, acceptLanguage: String?, fallback: PageLanguage) -> PageLanguage {
        if let uiLocales {
            for tag in uiLocales.split(separator: " ", omittingEmptySubsequences: true).prefix(32) {
                if let language = Self(tag: tag) { return language }
            }
        }
        guard let acceptLanguage else { return fallback }
        var best: (language: PageLanguage, quality: Double)?
        for entry in acceptLanguage.split(separator: ",", omittingEmptySubsequences: true).prefix(32) {
            let parts = entry.split(separator: ";")
            guard let tag = parts.first, let language = Self(tag: tag) else { continue }
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { Self.trimmed($0) }
                guard pair.count == 2, pair[0].lowercased() == "q" else { continue }
                guard pair[1].utf8.count <= 5, let value = Double(pair[1]), (0...1).contains(value) else { quality = 0; break }
                quality = value
            }
            if quality > 0, quality > (best?.quality ?? 0) { best = (language, quality) }
        }
        return best?.language ?? fallback
    }

    /// `fr`, `fr-FR`, `EN-gb`...: the primary subtag, when Relais has the language.
    init?(tag: Substring) {
        let primary = Self.trimmed(tag).split(separator: "-", maxSplits: 1).first.map { $0.lowercased() } ?? ""
        guard primary.utf8.count <= 8, let language = Self(rawValue: primary) else { return nil }
        self = language
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var slice = text
        while slice.first == " " || slice.first == "\t" { slice.removeFirst() }
        while slice.last == " " || slice.last == "\t" { slice.removeLast() }
        return slice
    }

    init(_ setting: PagesSettings.Language) {
        self = setting == .en ? .en : .fr
    }
}
