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
        @Test func aSignInRefreshAndUserinfoOnRedisMakeNoBlockingCallOnAnEventLoop() async throws {
            let redis = try await RedisServerProcess.launch()
            defer { redis.stop() }
            let harness = try await RelayHarness.launch(store: "  kind: redis\n  redis:\n    url: \(redis.url)")
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
