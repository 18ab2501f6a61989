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

    /// FranceConnect+'s own catalogue (fcp-high, `back/libs/scopes/src/data/fcp-high/fcp-high.scopes.ts`
    /// in FranceConnect's published source): no `given_name_array`, and the `rnipp_*` scopes, whose
    /// claims are the identity as the national register (RNIPP) has it. The development provider
    /// serves it in `fcplus` mode; Relais' own catalogue (``claimsByScope``) is unchanged by it.
    public static let franceConnectPlus: [String: [String]] = [
        "openid": ["sub"],
        "given_name": ["given_name"],
        "family_name": ["family_name"],
        "birthdate": ["birthdate"],
        "gender": ["gender"],
        "birthplace": ["birthplace"],
        "birthcountry": ["birthcountry"],
        "email": ["email"],
        "preferred_username": ["preferred_username"],
        "profile": ["given_name", "family_name", "birthdate", "gender", "preferred_username"],
        "birth": ["birthplace", "birthcountry"],
        "identite_pivot": ["given_name", "family_name", "birthdate", "gender", "birthplace", "birthcountry"],
        "rnipp_identite_pivot": [
            "gender", "rnipp_gender", "family_name", "rnipp_family_name", "given_name", "rnipp_given_name", "rnipp_given_name_array",
            "birthdate", "rnipp_birthdate", "birthplace", "rnipp_birthplace", "birthcountry", "rnipp_birthcountry",
        ],
        "rnipp_gender": ["gender", "rnipp_gender"],
        "rnipp_family_name": ["family_name", "rnipp_family_name"],
        "rnipp_given_name": ["given_name", "rnipp_given_name", "rnipp_given_name_array"],
        "rnipp_birthdate": ["birthdate", "rnipp_birthdate"],
        "rnipp_birthplace": ["birthplace", "rnipp_birthplace"],
        "rnipp_birthcountry": ["birthcountry", "rnipp_birthcountry"],
        "rnipp_profile": [
            "given_name", "rnipp_given_name", "rnipp_given_name_array", "family_name", "rnipp_family_name", "birthdate", "rnipp_birthdate",
            "gender", "rnipp_gender", "preferred_username",
        ],
        "rnipp_birth": ["birthplace", "rnipp_birthplace", "birthcountry", "rnipp_birthcountry"],
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
