public import Foundation

/// Where a test server keeps its files: a fresh temporary folder holding its configuration, written
/// for the port it will listen on (a free one unless given).
public struct TestServerFiles: Sendable {
    public let port: Int
    public let directory: URL
    public var configPath: String { directory.appendingPathComponent("config.yaml").path }

    public init(_ name: String, port: Int?, config: (Int) -> String) throws {
        self.port = try port ?? FreePort.find()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relais-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try config(self.port).write(toFile: configPath, atomically: true, encoding: .utf8)
    }
}
