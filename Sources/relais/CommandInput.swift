import ArgumentParser
import RelaisConfig

#if canImport(Glibc)
import Glibc
#endif

/// What the operator commands read: tokens and proofs given inline, in a file, or on standard
/// input (`-`, which keeps them out of shell history). Unusable input exits 2 with a sentence.
enum CommandInput {
    /// The argument itself, or standard input for `-`; whitespace removed (tokens and base64 have none).
    static func inline(_ argument: String, what: String) throws -> String {
        try compact(argument == "-" ? standardInput() : argument, empty: "no \(what) given")
    }

    /// A file's contents, or standard input for `-`; whitespace removed.
    static func compactFile(_ path: String) throws -> String {
        try compact(path == "-" ? standardInput() : file(path), empty: "\(path) is empty")
    }

    /// A file's contents as they are (a configuration, a PEM, a JWKS).
    static func file(_ path: String) throws -> String {
        switch ConfigurationLoader.readFile(path) {
        case .success(let text): return text
        case .failure(let problem): throw usage(problem.message)
        }
    }

    /// Prints the reason and gives the exit code for unusable arguments.
    static func usage(_ message: String) -> ExitCode {
        printError(message)
        return ExitCode(2)
    }

    private static func compact(_ text: String, empty: String) throws -> String {
        let compact = text.filter { !$0.isWhitespace }
        guard !compact.isEmpty else { throw usage(empty) }
        return compact
    }

    private static func standardInput() -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(STDIN_FILENO, &buffer, buffer.count)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
