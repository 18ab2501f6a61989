import Foundation
import RelaisTestSupport
import Testing

/// `make deps` on a system without apt (a Mac): scripts/ensure-debian-packages.sh installs nothing,
/// names what is missing with Homebrew's names, and fails only when something is.
@Suite struct DependencyScriptTests {
    static let script = RelaisProcess.packageRoot.appendingPathComponent("scripts/ensure-debian-packages.sh").path

    /// Runs the script with a PATH of only `tools` (no dpkg, no apt-get): its status and standard error.
    static func run(with tools: [String], packages: [String]) throws -> (Int32, String) {
        let bin = FileManager.default.temporaryDirectory.appendingPathComponent("relais-noapt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: bin) }
        for tool in ["bash", "cat", "sort", "tr", "id", "grep"] + tools {
            let found = try #require(["/usr/bin/", "/bin/", "/usr/local/bin/"].map { $0 + tool }.first { FileManager.default.isExecutableFile(atPath: $0) }, "\(tool)")
            try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent(tool).path, withDestinationPath: found)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script] + packages
        process.environment = ["PATH": bin.path]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    @Test func withoutAptItNamesWhatToInstall() throws {
        let (status, text) = try Self.run(with: [], packages: ["libhiredis-dev", "redis-server", "curl"])
        #expect(status == 1)
        #expect(text.contains("no apt-get") && text.contains("libhiredis-dev redis-server curl"), "\(text)")
        #expect(text.contains("brew install curl hiredis redis"), "\(text)")
    }

    @Test func withoutAptButWithEverythingItPasses() throws {
        let redis = try #require(RedisServerProcess.executable.split(separator: "/").last.map(String.init))
        let (status, text) = try Self.run(with: ["pkg-config", redis, "curl"], packages: ["libhiredis-dev", "redis-server", "curl"])
        #expect(status == 0, "\(text)")
    }
}
