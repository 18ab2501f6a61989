import RelaisHTTPClient

/// What a gateway may ask of `/auth` in its query. Every parameter is read before anything is
/// decided, and one that cannot be read refuses the request (400 `invalid_request`): a requirement
/// is never dropped because its value was empty, misspelt or of another kind (`attested=maybe`,
/// `aud=`, `session=yes`, `atested=1`).
enum ForwardAuthQuery {
    /// The parameters `/auth` knows.
    static let names = ["scope", "acr", "max_age", "aud", "attested", "session", "via"]

    /// nil when every parameter is known and its value is one it accepts; otherwise what is wrong.
    static func problem(in options: FormParameters) -> String? {
        for pair in options.pairs {
            let value = pair.value
            switch pair.name {
            case "scope":
                guard isList(value, scopeToken: true) else { return "scope must be one or more space-separated scope names" }
            case "aud":
                guard isList(value, scopeToken: false) else { return "aud must be one or more space-separated audiences" }
            case "acr", "max_age":
                if let problem = stepUpProblem(pair.name, value) { return problem }
            case "attested", "session":
                guard value == "0" || value == "1" else { return "\(pair.name) must be 0 or 1" }
            case "via":
                guard value == "token" || value == "cookie" || value == "both" else { return "via must be token, cookie or both" }
            default:
                return "the /auth query has no parameter '\(printable(pair.name))' (it knows \(names.joined(separator: ", ")))"
            }
        }
        return nil
    }

    /// What is wrong with a step-up parameter's value (`/auth` and `/userinfo` take the same): `acr`
    /// one level of visible ASCII without `"` or `\` (it goes back quoted in the challenge),
    /// `max_age` digits only.
    static func stepUpProblem(_ name: String, _ value: String) -> String? {
        switch name {
        case "acr":
            guard isList(value, scopeToken: true), !value.contains(" ") else { return "acr must be one acr level" }
        case "max_age":
            guard MaxAge.seconds(value) != nil else { return "max_age must be a number of seconds" }
        default:
            return nil
        }
        return nil
    }

    /// One or more names separated by single spaces, each of visible ASCII characters (for scopes,
    /// RFC 6749 §3.3's scope-token: no `"` or `\`).
    private static func isList(_ value: String, scopeToken: Bool) -> Bool {
        let names = value.split(separator: " ", omittingEmptySubsequences: false)
        return !value.isEmpty
            && names.allSatisfy { name in
                !name.isEmpty && name.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E && !(scopeToken && ($0 == 0x22 || $0 == 0x5C)) }
            }
    }

    /// A parameter name as the error may repeat it: short, visible ASCII only.
    static func printable(_ name: String) -> String {
        String(String.UnicodeScalarView(name.unicodeScalars.prefix(32).filter { $0.isASCII && $0.value >= 0x21 && $0.value <= 0x7E }))
    }
}
