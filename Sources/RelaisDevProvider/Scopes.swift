/// FranceConnect's scopes and the claims each one releases (fcp-low catalogue; v2 dropped
/// `address` and `phone`).
enum Scopes {
    static let claimsByScope: [String: [String]] = [
        "openid": ["sub"],
        "given_name": ["given_name", "given_name_array"],
        "family_name": ["family_name"],
        "birthdate": ["birthdate"],
        "gender": ["gender"],
        "birthplace": ["birthplace"],
        "birthcountry": ["birthcountry"],
        "email": ["email"],
        "preferred_username": ["preferred_username"],
        "profile": ["given_name", "given_name_array", "family_name", "birthdate", "gender", "preferred_username"],
        "birth": ["birthplace", "birthcountry"],
        "identite_pivot": ["given_name", "given_name_array", "family_name", "birthdate", "gender", "birthplace", "birthcountry"],
    ]

    static let supported: [String] = claimsByScope.keys.sorted()

    static func claims(for scopes: [String]) -> Set<String> {
        Set(scopes.flatMap { claimsByScope[$0] ?? [] })
    }
}
