import HTTPTypes
import Hummingbird

/// Fetch Metadata (`Sec-Fetch-Site`): the browser says which site started a request. Pages that act
/// on a person's sessions (a session code, a sign-out) ask before acting on one from elsewhere.
enum SecFetchSite {
    static let header = HTTPField.Name("Sec-Fetch-Site")!
    static let mode = HTTPField.Name("Sec-Fetch-Mode")!

    /// True when the browser says the request is a navigation (a link followed, a form submitted),
    /// not a script's or an app's request.
    static func isNavigation(_ request: Request) -> Bool {
        request.headers[mode]?.lowercased() == "navigate"
    }

    /// True unless the browser says the person opened the request (`none`: typed, bookmarked, or
    /// opened by an app, its webview included) or one of Relais' own pages did (`same-origin`). A
    /// sibling subdomain (`same-site`) is another party too, for what signs a browser in or out.
    /// Absent (an older browser, an app's own client) is not taken as elsewhere: apps and webviews
    /// they open send `none`.
    static func isFromElsewhere(_ request: Request) -> Bool {
        request.headers[values: header].contains { !["none", "same-origin"].contains($0.lowercased()) }
    }

    /// True when a form post comes from one of Relais' own pages (the confirmation pages): the
    /// browser says `same-origin`, or, in a browser too old for Fetch Metadata, its `Origin` is
    /// Relais' own. Anything else, and a post with neither, is refused.
    static func isSameOrigin(_ request: Request, issuer: String) -> Bool {
        let site = request.headers[values: header]
        if !site.isEmpty { return site.count == 1 && site[0].lowercased() == "same-origin" }
        let origins = request.headers[values: .origin]
        return origins.count == 1 && origins[0] == origin(of: issuer)
    }

    /// `scheme://host[:port]` of a URL.
    static func origin(of url: String) -> String {
        let parts = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        // "scheme:", "", "host[:port]", rest
        guard parts.count >= 3, parts[0].hasSuffix(":"), parts[1].isEmpty else { return url }
        return parts[0] + "//" + parts[2].prefix { $0 != "?" && $0 != "#" }
    }
}
