import RelaisHTTPClient
import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Testing

extension RelaySessionsAndProvidersChain {
    /// docs/capacity.md: request handlers run on the event loop that read the request, so nothing
    /// they call may block it. Redis is spoken on the loops themselves (hiredis as codec only), and
    /// libcurl only through its multi interface under the HTTP client's lock; a blocking Redis step
    /// on a loop, or a libcurl call without that lock, is counted, and a whole journey must count none.
    @Suite struct EventLoopInvariantTests {
        /// Over TCP, and through Redis' Unix-domain socket (`unix://`), which speaks the same way.
        @Test(arguments: [false, true]) func aSignInRefreshAndUserinfoOnRedisMakeNoBlockingCallOnAnEventLoop(unixSocket: Bool) async throws {
            let redis = try await RedisServerProcess.launch(unixSocket: unixSocket)
            defer { redis.stop() }
            let url = unixSocket ? try #require(redis.socketURL) : redis.url
            let harness = try await RelayHarness.launch(store: "  kind: redis\n  redis:\n    url: \(url)")
            try await BlockingCallChecks.shared.exclusively {
                let before = (HTTPClient.blockingCallsOnEventLoop, RedisStore.blockingCallsOnEventLoop)
                let tokens = try await harness.tokens()
                let refreshed = try await harness.refresh(try #require(tokens["refresh_token"]?.stringValue))
                #expect(refreshed.status == 200)
                let accessToken = try #require(JSONValue.object(from: refreshed.body)?["access_token"]?.stringValue)
                #expect(try await harness.userinfo(accessToken).status == 200)
                #expect(HTTPClient.blockingCallsOnEventLoop == before.0)
                #expect(RedisStore.blockingCallsOnEventLoop == before.1)
            }
        }
    }
}
