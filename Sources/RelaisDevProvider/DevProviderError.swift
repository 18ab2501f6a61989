/// Why the development provider cannot start or perform a test-API action. Codes are listed in
/// docs/errors.md.
enum DevProviderError: Error, Equatable, CustomStringConvertible {
    /// A key file, the store or the configuration made startup impossible.
    case startup(String)
    /// `provider.signing_key_file` is set: the test API cannot rotate a configured key.
    case keysPinned

    var code: String {
        switch self {
        case .startup: "dev_provider_startup"
        case .keysPinned: "dev_provider_keys_pinned"
        }
    }

    var description: String {
        switch self {
        case .startup(let message): "\(code): \(message)"
        case .keysPinned: "\(code): the signing key comes from provider.signing_key_file and cannot be rotated"
        }
    }
}
