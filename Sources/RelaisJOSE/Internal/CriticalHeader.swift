/// The `crit` rule shared by JWS and JWE (RFC 7515 §4.1.11, RFC 7516 §4.1.13): a non-empty array of
/// names, every one of which this implementation must process, or the token is refused.
enum CriticalHeader {
    /// Header parameters Relais processes; any other name in `crit` fails the token.
    static let understood: Set<String> = []

    /// Checks the header's `crit` value (nil when absent).
    static func check(_ crit: JSONValue?) throws(JOSEError) {
        guard let crit else { return }
        guard let names = crit.arrayValue?.compactMap(\.stringValue), !names.isEmpty, names.count == crit.arrayValue?.count else {
            throw .malformedToken(reason: "'crit' must be a non-empty array of strings")
        }
        let unknown = names.filter { !understood.contains($0) }
        if !unknown.isEmpty { throw .unsupportedCriticalHeader(unknown) }
    }
}
