/// Relais' pages for people (`pages.*`): the operator's name, logo, colour and support link, the
/// language used when the browser or the app asks for none Relais has, and an optional template.
/// docs/pages.md documents them.
public struct PagesSettings: Sendable, Equatable {
    /// The service people think they are using (shown in every page's header and title).
    public var serviceName = "Relais"
    /// An absolute https URL (or a path on Relais' host) of the logo, shown with `serviceName` as its text.
    public var logoURL: String?
    /// The accent colour of headings, links and buttons: `#rgb` or `#rrggbb`.
    public var primaryColor = "#000091"
    /// Where people get help; each page links to it.
    public var supportURL: String?
    public var defaultLanguage = Language.fr
    /// An HTML file with `{{lang}}`, `{{title}}`, `{{style}}`, `{{header}}`, `{{content}}` and
    /// `{{footer}}`, read at start-up; nil: Relais' own.
    public var template: String?

    public enum Language: String, Sendable, CaseIterable {
        case fr, en
    }

    public init() {}
}
