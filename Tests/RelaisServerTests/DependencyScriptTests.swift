import Foundation
import RelaisTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `make deps` on a system without apt (a Mac): scripts/ensure-debian-packages.sh installs nothing,
/// names what is missing with Homebrew's names, and fails only when something is.
@Suite struct DependencyScriptTests {
    static let script = RelaisProcess.packageRoot.appendingPathComponent("scripts/ensure-debian-packages.sh").path

    /// Runs the script with a PATH of only `tools` (no dpkg, no apt-get): its status and standard error.
    /// Started with posix_spawn, its error to a file, its exit polled: a Foundation `Pipe` is
    /// inherited by the redis-servers other tests start meanwhile, and reading it to its end then
    /// waited for them (a full run hung on it, both concurrency threads blocked).
    static func run(with tools: [String], packages: [String]) async throws -> (Int32, String) {
        let bin = FileManager.default.temporaryDirectory.appendingPathComponent("relais-noapt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: bin) }
        for tool in ["bash", "cat", "sort", "tr", "id", "grep"] + tools {
            let found = try #require(["/usr/bin/", "/bin/", "/usr/local/bin/"].map { $0 + tool }.first { FileManager.default.isExecutableFile(atPath: $0) }, "\(tool)")
            try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent(tool).path, withDestinationPath: found)
        }
        let errors = bin.appendingPathComponent("stderr").path
        let process = try ChildProcess.spawn("/bin/bash", [script] + packages, environment: ["PATH": bin.path], standardError: errors)
        let status = await process.exitStatus(within: .seconds(60))
        if status == nil { process.terminate(with: SIGKILL) }
        let ended = try #require(status, "the script did not end within 60 s")
        return (ended, (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")
    }

    @Test func withoutAptItNamesWhatToInstall() async throws {
        let (status, text) = try await Self.run(with: [], packages: ["libhiredis-dev", "redis-server", "curl"])
        #expect(status == 1)
        #expect(text.contains("no apt-get") && text.contains("libhiredis-dev redis-server curl"), "\(text)")
        #expect(text.contains("brew install curl hiredis redis"), "\(text)")
    }

    @Test func withoutAptButWithEverythingItPasses() async throws {
        let redis = try #require(RedisServerProcess.executable.split(separator: "/").last.map(String.init))
        let (status, text) = try await Self.run(with: ["pkg-config", redis, "curl"], packages: ["libhiredis-dev", "redis-server", "curl"])
        #expect(status == 0, "\(text)")
    }
}
