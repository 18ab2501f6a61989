public import RelaisJOSE

/// OpenID Connect Core §3.1.3.8's `at_hash` of the tests' access token (`access-1`): the left half
/// of its hash, the hash being the signing algorithm's (SHA-512 for EdDSA). Computed apart with
/// `printf access-1 | openssl dgst -shaN -binary | head -c N/2 | base64url`.
public enum AccessTokenHash {
    public static let accessToken = "access-1"
    public static let sha256Half = "9MKET0Y7WpOlF96BtnoJyA"
    public static let sha384Half = "BKKVvCkq9Iw_B35-CEucCIiT4hka5Okk"
    public static let sha512Half = "j_gttPifZFS_g6b4IrJKODpmGFP9qoL7SCZg8t8jzpU"

    /// The `at_hash` of ``accessToken`` in a token signed with `algorithm`.
    public static func expected(for algorithm: JWSAlgorithm) -> String {
        switch algorithm {
        case .rs256, .ps256, .es256, .hs256: sha256Half
        case .rs384, .ps384, .es384, .hs384: sha384Half
        case .rs512, .ps512, .es512, .hs512, .edDSA: sha512Half
        }
    }
}
