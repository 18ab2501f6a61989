import InMemoryTracing
import RelaisStore
import Testing
import Tracing

@Suite struct TracedStoreTests {
    @Test func eachCallIsAClientSpanWithoutItsKeysOrValues() async throws {
        let tracer = InMemoryTracer()
        let store = TracedStore(EmbeddedStore(), tracer: tracer, system: "relais.embedded")
        try await tracer.withSpan("POST /token", ofKind: .server) { _ in
            try await store.set("sess:secret-key", Array("secret-value".utf8), ttl: .seconds(60))
            #expect(try await store.take("sess:secret-key", applying: [.set("code:other-secret", [1], ttl: nil), .delete("x")]) == Array("secret-value".utf8))
        }
        let spans = tracer.finishedSpans
        let parent = try #require(spans.first { $0.operationName == "POST /token" })
        #expect(spans.map(\.operationName) == ["store set", "store take", "POST /token"])
        let take = spans[1]
        #expect(take.kind == .client)
        #expect(take.parentSpanID == parent.spanID)
        #expect(take.attributes["db.operation.name"]?.toSpanAttribute() == "take")
        #expect(take.attributes["relais.store.writes"]?.toSpanAttribute() == 2)
        let recorded = spans.map { "\($0.attributes)" }.joined()
        for secret in ["secret-key", "secret-value", "other-secret"] { #expect(!recorded.contains(secret)) }
        // The wrapped store stays reachable (the relay asks Redis for its persistence settings).
        #expect(store.base is EmbeddedStore)
    }

    @Test func aFailureSetsOnlyTheStoreErrorCode() async throws {
        let tracer = InMemoryTracer()
        let store = TracedStore(EmbeddedStore(), tracer: tracer, system: "relais.embedded")
        try await store.shutdown()
        await #expect(throws: StoreError.shutdown) { try await store.get("sess:secret-key") }
        let span = try #require(tracer.finishedSpans.first)
        #expect(span.operationName == "store get")
        #expect(span.status == SpanStatus(code: .error, message: StoreError.shutdown.code))
    }
}
