/// The scopes Relais and its development provider know, and the identity claims each releases:
/// FranceConnect's catalogue (fcp-low; v2 dropped `address` and `phone`), whose `profile` and
/// `email` match OpenID Connect's standard scopes.
public enum ScopeCatalogue {
    public static let claimsByScope: [String: [String]] = [
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

    public static let supported: [String] = claimsByScope.keys.sorted()

    /// Every identity claim a scope can release (`sub` excepted).
    public static let identityClaims: Set<String> = Set(claimsByScope.values.joined()).subtracting(["sub"])

    public static func claims(for scopes: [String]) -> Set<String> {
        Set(scopes.flatMap { claimsByScope[$0] ?? [] })
    }
}
