import CCurl
import Synchronization

/// One libcurl easy handle. A handle keeps its own connection cache, so reusing the handle is
/// what gives keep-alive. Exclusive use is enforced by ``CurlHandlePool``: one transfer at a time.
final class CurlEasyHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer

    init() {
        CurlGlobal.ensureInitialized()
        guard let handle = curl_easy_init() else {
            preconditionFailure("curl_easy_init failed: out of memory")
        }
        raw = handle
    }

    deinit { curl_easy_cleanup(raw) }
}

/// Idle easy handles, most recently used first (its connection is the likeliest to still be open).
final class CurlHandlePool: Sendable {
    private let idle = Mutex<[CurlEasyHandle]>([])
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func checkOut() -> CurlEasyHandle {
        idle.withLock { $0.popLast() } ?? CurlEasyHandle()
    }

    func checkIn(_ handle: CurlEasyHandle) {
        idle.withLock { handles in
            if handles.count < capacity { handles.append(handle) }
        }
    }

    func drain() { idle.withLock { $0.removeAll() } }
}

enum CurlGlobal {
    // curl_global_init is not thread-safe: a static let runs it exactly once.
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    static func ensureInitialized() {
        precondition(initialized, "curl_global_init failed")
    }
}

/// What the C callbacks write into during one transfer. Lives exactly as long as the transfer.
final class CurlTransferState {
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    let maxBytes: Int
    var exceededLimit = false
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit { errorBuffer.deallocate() }

    var errorMessage: String { String(cString: errorBuffer) }
}

/// A cancellation flag shared between the awaiting task and the worker thread.
final class CurlCancellation: Sendable {
    let flag = Atomic<Bool>(false)
}

// C callbacks: no captures; the transfer state arrives through the user-data pointer.
let curlWriteCallback: relais_curl_data_callback = { data, size, count, userData in
    let state = Unmanaged<CurlTransferState>.fromOpaque(userData!).takeUnretainedValue()
    let length = size * count
    guard state.body.count + length <= state.maxBytes else {
        state.exceededLimit = true
        return 0  // a short write makes libcurl abort with CURLE_WRITE_ERROR
    }
    if length > 0, let data {
        data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            state.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: length))
        }
    }
    return length
}

let curlHeaderCallback: relais_curl_data_callback = { data, size, count, userData in
    let state = Unmanaged<CurlTransferState>.fromOpaque(userData!).takeUnretainedValue()
    let length = size * count
    guard let data, length > 0 else { return length }
    let line = data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
        String(decoding: UnsafeBufferPointer(start: bytes, count: length), as: UTF8.self)
    }
    if line.hasPrefix("HTTP/") {
        state.headers.removeAll()  // a new response (after a redirect or a 100 Continue) starts over
    } else if let colon = line.firstIndex(of: ":") {
        let name = String(line[..<colon]).trimmingWhitespace()
        let value = String(line[line.index(after: colon)...]).trimmingWhitespace()
        state.headers.append((name: name, value: value))
    }
    return length
}

let curlProgressCallback: relais_curl_progress_callback = { userData, _, _, _, _ in
    let cancellation = Unmanaged<CurlCancellation>.fromOpaque(userData!).takeUnretainedValue()
    return cancellation.flag.load(ordering: .relaxed) ? 1 : 0  // non-zero aborts the transfer
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
