import COpenSSL

/// The calling thread's OpenSSL error queue, for the tests that check a failure leaves it empty
/// (an entry left there is read as the reason of the thread's next, unrelated, failure).
public enum OpenSSLErrorQueue {
    public static func clear() { ERR_clear_error() }

    /// The queued errors as text, oldest first (empty when the queue is), and the queue emptied.
    public static func drain() -> [String] {
        var errors: [String] = []
        var code = ERR_get_error()
        while code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            errors.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            code = ERR_get_error()
        }
        return errors
    }
}
