import COpenSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Owns one EVP_PKEY. OpenSSL 3 keys are reference-counted and safe to use from several threads
/// for signing and verification once built; this wrapper never mutates the key after creation.
final class OpenSSLKey: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Contexts set up once per algorithm and use (padding, digest) and reused: a context
    /// initialised for verification verifies any number of signatures, one for signing signs any
    /// number of digests (ECDSA draws a fresh nonce at each signature), one caller at a time. Idle
    /// contexts wait here; a busy moment adds duplicates, bounded per algorithm and use.
    private let contexts = Mutex<[ContextUse: [IdleContext]]>([:])
    private struct ContextUse: Hashable { let algorithm: JWSAlgorithm, signing: Bool }
    /// An EVP_PKEY_CTX owned by the pool while idle, by exactly one caller while in use.
    private struct IdleContext: @unchecked Sendable { let pointer: OpaquePointer }
    private static let maxIdleContexts = 8

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        contexts.withLock { $0.values.joined().forEach { EVP_PKEY_CTX_free($0.pointer) } }
        EVP_PKEY_free(pointer)
    }

    /// Runs `body` with a verification context for `algorithm` (RSA and ECDSA); nil when OpenSSL
    /// cannot set one up, in which case the caller falls back to a one-off context.
    func withVerifyContext<Result>(for algorithm: JWSAlgorithm, _ body: (OpaquePointer) -> Result) -> Result? {
        withContext(ContextUse(algorithm: algorithm, signing: false), body)
    }

    /// Runs `body` with a signing context for `algorithm` (RSA and ECDSA, over a digest); nil when
    /// OpenSSL cannot set one up, in which case the caller falls back to a one-off context.
    func withSignContext<Result>(for algorithm: JWSAlgorithm, _ body: (OpaquePointer) -> Result) -> Result? {
        withContext(ContextUse(algorithm: algorithm, signing: true), body)
    }

    private func withContext<Result>(_ use: ContextUse, _ body: (OpaquePointer) -> Result) -> Result? {
        let idle = contexts.withLock { $0[use]?.popLast() }
        guard let context = idle?.pointer ?? makeContext(for: use) else { return nil }
        let result = body(context)
        let returning = IdleContext(pointer: context)
        let kept = contexts.withLock { contexts in
            guard contexts[use, default: []].count < Self.maxIdleContexts else { return false }
            contexts[use, default: []].append(returning)
            return true
        }
        if !kept { EVP_PKEY_CTX_free(context) }
        return result
    }

    private func makeContext(for use: ContextUse) -> OpaquePointer? {
        let algorithm = use.algorithm
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else {
            OpenSSLErrors.clear()
            return nil
        }
        var ok = (use.signing ? EVP_PKEY_sign_init(context) : EVP_PKEY_verify_init(context)) == 1
        ok = ok && EVP_PKEY_CTX_set_signature_md(context, algorithm.digest) == 1
        if ok, algorithm.family == .rsaPSS {
            ok =
                EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PSS_PADDING) == 1
                && EVP_PKEY_CTX_set_rsa_pss_saltlen(context, Int32(algorithm.hashLength)) == 1
                && EVP_PKEY_CTX_set_rsa_mgf1_md(context, algorithm.digest) == 1
        } else if ok, algorithm.family == .rsaPKCS1 {
            ok = EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_PADDING) == 1
        }
        guard ok else {
            EVP_PKEY_CTX_free(context)
            OpenSSLErrors.clear()
            return nil
        }
        return context
    }

    var baseID: Int32 { EVP_PKEY_get_base_id(pointer) }
    var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }
    /// The largest signature in bytes: an RSA key's modulus length.
    var size: Int { Int(EVP_PKEY_get_size(pointer)) }

    /// Builds a key from OSSL_PARAM components (`EVP_PKEY_fromdata`), e.g. RSA n/e or EC group/pub.
    /// Whatever step fails, the thread's error queue is left empty.
    static func fromData(
        type: String,
        isPrivate: Bool,
        _ push: (ParamBuilder) throws(JOSEError) -> Void
    ) throws(JOSEError) -> OpenSSLKey {
        do {
            return try buildFromData(type: type, isPrivate: isPrivate, push)
        } catch {
            OpenSSLErrors.clear()
            throw error
        }
    }

    private static func buildFromData(
        type: String,
        isPrivate: Bool,
        _ push: (ParamBuilder) throws(JOSEError) -> Void
    ) throws(JOSEError) -> OpenSSLKey {
        let builder = try ParamBuilder()
        try push(builder)
        guard let params = OSSL_PARAM_BLD_to_param(builder.raw) else { throw .cryptoFailure(reason: "OSSL_PARAM_BLD_to_param failed") }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { throw .cryptoFailure(reason: "no OpenSSL key type \(type)") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        let selection = isPrivate ? relais_evp_pkey_keypair_selection() : relais_evp_pkey_public_key_selection()
        guard EVP_PKEY_fromdata_init(context) == 1, EVP_PKEY_fromdata(context, &key, selection, params) == 1, let key else {
            let detail = OpenSSLErrors.lastMessage()
            throw .invalidKey(reason: "OpenSSL rejected the \(type) key components\(detail.map { ": \($0)" } ?? "")")
        }
        let made = OpenSSLKey(taking: key)
        // Imported parts are not checked against each other: a private half that is not the
        // public half's would sign what the published key never verifies.
        if isPrivate {
            guard let check = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw .cryptoFailure(reason: "EVP_PKEY_CTX_new_from_pkey failed") }
            defer { EVP_PKEY_CTX_free(check) }
            guard EVP_PKEY_pairwise_check(check) == 1 else {
                throw .invalidKey(reason: "the \(type) key's private part does not match its public part")
            }
        }
        return made
    }

    /// A big-endian unsigned integer parameter (RSA n, e, …), without leading zero bytes.
    func bigNumber(_ name: String) -> [UInt8]? {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pointer, name, &number) == 1, let number else {
            OpenSSLErrors.clear()
            return nil
        }
        defer { BN_clear_free(number) }
        var bytes = [UInt8](repeating: 0, count: Int(relais_bn_num_bytes(number)))
        _ = bytes.withUnsafeMutableBufferPointer { BN_bn2bin(number, $0.baseAddress) }
        return bytes
    }

    func octetString(_ name: String) -> [UInt8]? {
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pointer, name, nil, 0, &length) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: length)
        guard bytes.withUnsafeMutableBufferPointer({ EVP_PKEY_get_octet_string_param(pointer, name, $0.baseAddress, length, &length) }) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        return Array(bytes.prefix(length))
    }

    func utf8String(_ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pointer, name, &buffer, buffer.count, &length) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func rawPublicKey() -> [UInt8]? {
        var length = 0
        guard EVP_PKEY_get_raw_public_key(pointer, nil, &length) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: length)
        guard bytes.withUnsafeMutableBufferPointer({ EVP_PKEY_get_raw_public_key(pointer, $0.baseAddress, &length) }) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        return bytes
    }

    /// Whether the key holds private material (can sign).
    var hasPrivateKey: Bool {
        switch baseID {
        case EVP_PKEY_ED25519:
            var length = 0
            let ok = EVP_PKEY_get_raw_private_key(pointer, nil, &length) == 1
            OpenSSLErrors.clear()
            return ok
        case EVP_PKEY_EC:
            var number: OpaquePointer?
            let ok = EVP_PKEY_get_bn_param(pointer, OSSL_PKEY_PARAM_PRIV_KEY, &number) == 1
            BN_clear_free(number)
            OpenSSLErrors.clear()
            return ok
        default:
            var number: OpaquePointer?
            let ok = EVP_PKEY_get_bn_param(pointer, OSSL_PKEY_PARAM_RSA_D, &number) == 1
            BN_clear_free(number)
            OpenSSLErrors.clear()
            return ok
        }
    }
}

/// OpenSSL's error queue is per thread, and tokens are checked on shared event-loop threads: every
/// path on which an OpenSSL call fails, or is expected to fail (a signature that does not verify),
/// leaves the queue empty, so that a later failure on the thread reports its own reason and the
/// queue does not grow. OpenSSLErrorQueueTests checks every path a test can reach.
enum OpenSSLErrors {
    /// Empties the thread's error queue, after a failure whose reason is not read.
    static func clear() { ERR_clear_error() }

    /// The most recent OpenSSL error as text (then the queue is cleared).
    static func lastMessage() -> String? {
        let code = ERR_peek_last_error()
        defer { ERR_clear_error() }
        guard code != 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// An OSSL_PARAM_BLD and the buffers it references: OpenSSL reads them only in
/// OSSL_PARAM_BLD_to_param, so they live exactly as long as the builder.
final class ParamBuilder {
    let raw: OpaquePointer
    private var numbers: [OpaquePointer] = []
    private var buffers: [UnsafeMutableRawPointer] = []

    init() throws(JOSEError) {
        guard let raw = OSSL_PARAM_BLD_new() else { throw .cryptoFailure(reason: "OSSL_PARAM_BLD_new failed") }
        self.raw = raw
    }

    deinit {
        numbers.forEach { BN_clear_free($0) }
        buffers.forEach { free($0) }
        OSSL_PARAM_BLD_free(raw)
    }

    /// The builder keeps the parameter name pointer too, so names are copied: a Swift String passed
    /// as `const char *` is only valid for the duration of the call.
    private func retainedName(_ name: String) throws(JOSEError) -> UnsafeMutablePointer<CChar> {
        guard let copy = strdup(name) else { throw .cryptoFailure(reason: "out of memory") }
        buffers.append(UnsafeMutableRawPointer(copy))
        return copy
    }

    func bigNumber(_ name: String, _ bytes: [UInt8]) throws(JOSEError) {
        let number: OpaquePointer? = bytes.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        guard let number else { throw .cryptoFailure(reason: "BN_bin2bn failed") }
        numbers.append(number)
        guard OSSL_PARAM_BLD_push_BN(raw, try retainedName(name), number) == 1 else { throw .cryptoFailure(reason: "OSSL_PARAM_BLD_push_BN failed") }
    }

    func utf8(_ name: String, _ value: String) throws(JOSEError) {
        guard let copy = strdup(value) else { throw .cryptoFailure(reason: "out of memory") }
        buffers.append(UnsafeMutableRawPointer(copy))
        guard OSSL_PARAM_BLD_push_utf8_string(raw, try retainedName(name), copy, 0) == 1 else { throw .cryptoFailure(reason: "OSSL_PARAM_BLD_push_utf8_string failed") }
    }

    func octets(_ name: String, _ bytes: [UInt8]) throws(JOSEError) {
        guard let copy = malloc(max(1, bytes.count)) else { throw .cryptoFailure(reason: "out of memory") }
        buffers.append(copy)
        bytes.withUnsafeBytes { source in if let base = source.baseAddress { copy.copyMemory(from: base, byteCount: bytes.count) } }
        guard OSSL_PARAM_BLD_push_octet_string(raw, try retainedName(name), copy, bytes.count) == 1 else { throw .cryptoFailure(reason: "OSSL_PARAM_BLD_push_octet_string failed") }
    }
}
