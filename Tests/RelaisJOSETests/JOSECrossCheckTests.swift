import Foundation
import RelaisJOSE
import RelaisTestSupport
import Testing

/// The other direction of cross-implementation testing: what Relais signs and encrypts, joserfc
/// (Python, PyPI) must verify and decrypt. `make test` installs joserfc when it is missing.
@Suite struct JOSECrossCheckTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/jose-crosscheck.py").path

    @Test func joserfcVerifiesAndDecryptsWhatRelaisProduces() async throws {
        var jwsItems: [JSONValue] = []
        for vector in Vectors.all {
            let algorithm = try #require(JWSAlgorithm(rawValue: vector.alg))
            let payload = #"{"iss":"https://relais.example","sub":"relais-signed","alg":"\#(vector.alg)"}"#
            let token = try JWS.sign(payload: Array(payload.utf8), with: try JWK(object: vector.private_jwk), algorithm: algorithm, extraHeader: ["typ": .string("JWT")])
            jwsItems.append(
                .object([
                    "alg": .string(vector.alg), "token": .string(token), "payload": .string(payload),
                    "public_jwk": .object(vector.public_jwk ?? vector.private_jwk),
                ]))
        }
        var jweItems: [JSONValue] = []
        for vector in JWEVectors.all {
            let privateKey = try JWK(object: vector.private_jwk)
            let recipient = try privateKey.publicJSON().map { try JWK(object: $0) } ?? privateKey
            let plaintext = "chiffré par Relais: \(vector.alg) \(vector.enc)"
            let token = try JWE.encrypt(
                Array(plaintext.utf8), to: recipient,
                keyAlgorithm: try #require(JWEKeyAlgorithm(rawValue: vector.alg)),
                contentAlgorithm: try #require(JWEContentAlgorithm(rawValue: vector.enc))
            )
            jweItems.append(
                .object([
                    "alg": .string(vector.alg), "enc": .string(vector.enc), "token": .string(token),
                    "plaintext": .string(plaintext), "private_jwk": .object(vector.private_jwk),
                ]))
        }
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("relais-crosscheck-\(UUID().uuidString).json")
        try Data(JSONValue.object(["jws": .array(jwsItems), "jwe": .array(jweItems)]).serialized()).write(to: input)
        let output = input.path + ".out"
        let process = try ChildProcess.spawn("/usr/bin/env", ["python3", Self.script, input.path], standardOutput: output, standardError: output)
        let status = await process.exitStatus(within: .seconds(120))
        let report = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(status == 0, "\(report)")
        let lines = report.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("ok jws") }.count == Vectors.all.count, "\(report)")
        #expect(lines.filter { $0.hasPrefix("ok jwe") }.count == JWEVectors.all.count, "\(report)")
    }
}
