import Foundation

/// A server certificate for 127.0.0.1 and a client certificate, both self-signed P-256, made by
/// `openssl req` in a fresh temporary directory: for TLS tests against `openssl s_server` and a
/// TLS `redis-server`. Each certificate is its own CA.
public struct TestCertificates: Sendable {
    public let directory: String
    public var serverCertificate: String { directory + "/server.pem" }
    public var serverKey: String { directory + "/server.key" }
    public var clientCertificate: String { directory + "/client.pem" }
    public var clientKey: String { directory + "/client.key" }
    /// Both certificates in one PEM file: what a server that is also a client trusts (a Redis
    /// replica or sentinel reaches the master over TLS and is reached by clients).
    public var bundle: String { directory + "/bundle.pem" }

    public static func make() async throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("relais-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, subject, extensions) in [
            ("server", "/CN=127.0.0.1", ["-addext", "subjectAltName=IP:127.0.0.1"]),
            ("client", "/CN=relais-test-client", []),
        ] {
            let process = try ChildProcess.spawn(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem", "-days", "2", "-subj", subject,
                ] + extensions)
            guard await process.exitStatus(within: .seconds(20)) == 0 else { throw ChildProcessError.spawnFailed(executable: "openssl", errno: -1) }
        }
        let certificates = TestCertificates(directory: directory)
        let both = try String(contentsOfFile: certificates.serverCertificate, encoding: .utf8) + String(contentsOfFile: certificates.clientCertificate, encoding: .utf8)
        try both.write(toFile: certificates.bundle, atomically: true, encoding: .utf8)
        return certificates
    }
}
