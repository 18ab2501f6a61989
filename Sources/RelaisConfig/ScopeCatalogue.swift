/// The scopes Relais and its development provider know, and the identity claims each releases.
public enum ScopeCatalogue {
    /// FranceConnect's catalogue (fcp-low; v2 dropped `address` and `phone`), whose `profile` and
    /// `email` match OpenID Connect's standard scopes.
    public static let franceConnect: [String: [String]] = [
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

    /// ProConnect's catalogue (civil servants and professionals): each scope releases the claim of
    /// its name, except `phone` (`phone_number`) and `chorusdt` (two prefixed claims).
    public static let proConnect: [String: [String]] = [
        "openid": ["sub"],
        "given_name": ["given_name"],
        "usual_name": ["usual_name"],
        "email": ["email"],
        "uid": ["uid"],
        "siret": ["siret"],
        "siren": ["siren"],
        "organizational_unit": ["organizational_unit"],
        "belonging_population": ["belonging_population"],
        "phone": ["phone_number"],
        "chorusdt": ["chorusdt:matricule", "chorusdt:societe"],
        "idp_id": ["idp_id"],
        "idp_acr": ["idp_acr"],
        "organization_label": ["organization_label"],
        "roles": ["roles"],
        "custom": ["custom"],
    ]

    /// Both catalogues: what Relais passes on to apps. A scope both know (`given_name`, `email`)
    /// releases FranceConnect's claims, a superset of ProConnect's.
    public static let claimsByScope: [String: [String]] = franceConnect.merging(proConnect) { franceConnect, _ in franceConnect }

    public static let supported: [String] = claimsByScope.keys.sorted()

    /// Every identity claim a scope can release (`sub` excepted).
    public static let identityClaims: Set<String> = Set(claimsByScope.values.joined()).subtracting(["sub"])

    public static func claims(for scopes: [String]) -> Set<String> {
        claims(for: scopes, in: claimsByScope)
    }

    public static func claims(for scopes: [String], in catalogue: [String: [String]]) -> Set<String> {
        Set(scopes.flatMap { catalogue[$0] ?? [] })
    }
}
