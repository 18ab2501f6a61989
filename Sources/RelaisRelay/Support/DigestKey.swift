import RelaisCrypto

/// A SHA-256 digest as an in-process cache key: four words inline, no heap block, hashed as four
/// words (a `[UInt8]` key is a heap block hashed one byte at a time, on every gateway request).
struct DigestKey: Hashable, Sendable {
    private let words: (UInt64, UInt64, UInt64, UInt64)

    /// The SHA-256 of `text`'s UTF-8.
    init(hashing text: some StringProtocol) {
        self.init(digest: SHA256.hash(text))
    }

    init(digest: [UInt8]) {
        precondition(digest.count == SHA256.byteCount, "a DigestKey is a SHA-256 digest")
        words = digest.withUnsafeBytes { raw in
            (
                raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
            )
        }
    }

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}
