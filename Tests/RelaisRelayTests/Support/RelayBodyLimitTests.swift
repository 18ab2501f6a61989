import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisTestSupport
import Testing

/// Bodies over a limit are 413, however they arrive: with a Content-Length, or chunked (the size
/// only known while the body streams in). Never a 500.
@Suite struct RelayBodyLimitTests {
    static func chunked(_ path: String, bytes: Int, port: Int) async throws -> String {
        try await RawConnection.blocking { chunkedBlocking(path, bytes: bytes, port: port) }
    }

    static func chunkedBlocking(_ path: String, bytes: Int, port: Int) -> String {
        guard let connection = RawConnection(port: port) else { return "" }
        var parts = ["POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"]
        var left = bytes
        while left > 0 {
            let chunk = min(left, 4096)
            parts.append(String(chunk, radix: 16) + "\r\n" + String(repeating: "a", count: chunk) + "\r\n")
            left -= chunk
        }
        // 20 s for the answer: 5 s once passed with nothing on a loaded machine.
        return connection.sendUntilAnswered(parts + ["0\r\n\r\n"], timeout: .seconds(20))
    }

    static func status(_ response: String) -> String { String(response.split(separator: "\r\n").first ?? "") }

    static func raw(_ head: String, port: Int) async throws -> String {
        try await RawConnection.blocking {
            guard let connection = RawConnection(port: port) else { return "" }
            return connection.sendUntilAnswered([head], timeout: .seconds(20))
        }
    }

    /// The body limit reads one declared Content-Length; a repeated one, or a list, never reaches
    /// it: the HTTP parser refuses the request, so no length goes unchecked. A declared length over
    /// the limit is refused before any body is read.
    @Test func aRepeatedContentLengthIsRefusedAndAnOversizedOneIsNotRead() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test(.live) { client in
            let port = try #require(client.port)
            let head = "POST /token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n"
            let repeated = try await Self.raw(head + "Content-Length: 3\r\nContent-Length: 3\r\n\r\na=b", port: port)
            #expect(Self.status(repeated) == "HTTP/1.1 400 Bad Request", "\(repeated.prefix(300))")
            let listed = try await Self.raw(head + "Content-Length: 3, 3\r\n\r\na=b", port: port)
            #expect(Self.status(listed) == "HTTP/1.1 400 Bad Request", "\(listed.prefix(300))")
            let declared = try await Self.raw(head + "Content-Length: 99999999\r\n\r\na=b", port: port)
            #expect(Self.status(declared) == "HTTP/1.1 413 Payload Too Large", "\(declared.prefix(300))")
            #expect(declared.contains(#""error":"request_too_large""#))
        }
    }

    @Test func oversizedBodiesAre413WhicheverWayTheyArrive() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test(.live) { client in
            let port = try #require(client.port)
            // Over server.max_body_bytes (64 KiB), chunked: found out while streaming.
            let token = try await Self.chunked("/token", bytes: 200_000, port: port)
            #expect(Self.status(token) == "HTTP/1.1 413 Payload Too Large", "\(token.prefix(300))")
            #expect(token.contains(#""error":"request_too_large""#))
            // /logout reads at most 16 KiB: over it is 413 too, chunked or declared.
            #expect(Self.status(try await Self.chunked("/logout", bytes: 20_000, port: port)) == "HTTP/1.1 413 Payload Too Large")
            let declared = try await client.execute(
                uri: "/logout", method: .post, headers: RelayRouteTests.formHeaders, body: ByteBuffer(string: String(repeating: "a", count: 20_000))
            )
            #expect(declared.status == .contentTooLarge)
            // Under the limits, a chunked body is read as usual.
            let small = try await Self.chunked("/token", bytes: 100, port: port)
            #expect(Self.status(small) == "HTTP/1.1 400 Bad Request" && small.contains("invalid_request"), "\(small.prefix(300))")
        }
    }
}
