import RelaisJOSE

/// FranceConnect's identity pivot: the six claims that name a person the same way across
/// FranceConnect and FranceConnect+, whose `sub`s differ for one person. A step-up replaces a
/// session only when the pivot of the new sign-in is the pivot of the old one.
enum IdentityPivot {
    static let claims = ["given_name", "family_name", "birthdate", "gender", "birthplace", "birthcountry"]
    /// Without these on both sides nothing is compared: fail closed.
    static let required = ["given_name", "family_name", "birthdate"]

    static func matches(_ old: [String: JSONValue], _ new: [String: JSONValue]) -> Bool {
        for name in required {
            guard let value = old[name]?.stringValue, !value.isEmpty, new[name]?.stringValue == value else { return false }
        }
        // The others may be absent (a birthplace for a person born abroad), but then on both sides.
        return claims.allSatisfy { old[$0] == new[$0] }
    }
}
