import Logging
import Metrics
import RelaisTestSupport
import Testing

@testable import RelaisTelemetry

@Suite struct TracingEnvironmentTests {
    private func read(_ environment: [String: String]) throws(TracingEnvironmentError) -> TracingEnvironment? {
        try TracingEnvironment.read(environment, defaultServiceName: "relais")
    }

    private func problems(_ environment: [String: String]) -> [String] {
        do {
            _ = try TracingEnvironment.read(["OTEL_TRACES_EXPORTER": "otlp"].merging(environment) { $1 }, defaultServiceName: "relais") { !$0.hasPrefix("/missing/") }
            return []
        } catch {
            return error.problems
        }
    }

    @Test(.tags(.fast)) func tracesAreOffUnlessTheExporterIsOTLP() throws {
        #expect(try read([:]) == nil)
        #expect(try read(["OTEL_TRACES_EXPORTER": "none"]) == nil)
        #expect(try read(["OTEL_TRACES_EXPORTER": ""]) == nil)
        #expect(try read(["OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"]) == nil)
        // Variables for other processes do not stop a relay that does not trace.
        #expect(try read(["OTEL_TRACES_SAMPLER": "xray", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]) == nil)
    }

    @Test func theEndpointFollowsTheOTLPRules() throws {
        let defaults = try #require(try read(["OTEL_TRACES_EXPORTER": "otlp"]))
        #expect(defaults == TracingEnvironment(endpoint: "http://localhost:4318/v1/traces", serviceName: "relais", sampler: "parentbased_always_on"))
        let base = try #require(try read(["OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/", "OTEL_SERVICE_NAME": "relais-eu"]))
        #expect(base.endpoint == "http://127.0.0.1:4318/v1/traces")
        #expect(base.serviceName == "relais-eu")
        let exact = try #require(
            try read([
                "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:2/custom",
                "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_PROPAGATORS": "tracecontext",
                "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "100", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer x,tenant=fr",
            ]))
        #expect(exact.endpoint == "https://b:2/custom")
        #expect(exact.sampler == "parentbased_traceidratio")
    }

    /// Each unusable value refuses the start, naming its variable (fail closed: swift-otel would
    /// log it and fall back to a default, or stop the process for gRPC).
    @Test(arguments: [
        (["OTEL_TRACES_EXPORTER": "zipkin"], "OTEL_TRACES_EXPORTER: expected otlp or none, got 'zipkin'"),
        (["OTEL_SDK_DISABLED": "yes"], "OTEL_SDK_DISABLED: expected true or false, got 'yes'"),
        (["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"], "OTEL_EXPORTER_OTLP_PROTOCOL: expected http/protobuf, got 'grpc'"),
        (["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"], "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: expected http/protobuf, got 'http/json'"),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"], "OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL with a host"),
        (["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http:///v1/traces"], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: expected an http:// or https:// URL"),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:abc/"], "OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL with a host (and a numeric port)"),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": "http://[::1]:x"], "OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL"),
        (["OTEL_EXPORTER_OTLP_ENDPOINT": ""], "OTEL_EXPORTER_OTLP_ENDPOINT: is set but empty or padded with spaces"),
        (["OTEL_TRACES_SAMPLER": "always_off "], "OTEL_TRACES_SAMPLER: is set but empty or padded with spaces"),
        (["OTEL_EXPORTER_OTLP_TRACES_HEADERS": ""], "OTEL_EXPORTER_OTLP_TRACES_HEADERS: is set but empty or padded with spaces"),
        (["OTEL_EXPORTER_OTLP_HEADERS": "authorization="], "OTEL_EXPORTER_OTLP_HEADERS: expected key=value pairs separated by commas"),
        (["OTEL_EXPORTER_OTLP_CLIENT_KEY": "/k.pem"], "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: a client certificate and its key go together"),
        (["OTEL_EXPORTER_OTLP_CERTIFICATE": "/missing/ca.pem"], "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read the file '/missing/ca.pem'"),
        (["OTEL_TRACES_SAMPLER": "xray"], "OTEL_TRACES_SAMPLER: expected one of always_off, always_on, parentbased_always_off"),
        (["OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"], "OTEL_TRACES_SAMPLER_ARG: expected a ratio between 0 and 1, got '1.5'"),
        (["OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"], "OTEL_TRACES_SAMPLER_ARG: expected a ratio between 0 and 1, got 'half'"),
        (["OTEL_PROPAGATORS": "tracecontext,b3,baggage"], "OTEL_PROPAGATORS: expected tracecontext or none, got 'b3,baggage'"),
        (["OTEL_BSP_SCHEDULE_DELAY": "5s"], "OTEL_BSP_SCHEDULE_DELAY: expected a whole number of milliseconds from 1 to 3600000, got '5s'"),
        (["OTEL_BSP_SCHEDULE_DELAY": "0"], "OTEL_BSP_SCHEDULE_DELAY: expected a whole number of milliseconds from 1 to 3600000, got '0'"),
        (["OTEL_EXPORTER_OTLP_TIMEOUT": "-1"], "OTEL_EXPORTER_OTLP_TIMEOUT: expected a whole number of milliseconds from 1 to 3600000, got '-1'"),
        (["OTEL_BSP_MAX_QUEUE_SIZE": "0"], "OTEL_BSP_MAX_QUEUE_SIZE: expected a whole number of spans from 1 to 1000000, got '0'"),
        (["OTEL_BSP_MAX_QUEUE_SIZE": "99999999999"], "OTEL_BSP_MAX_QUEUE_SIZE: expected a whole number of spans from 1 to 1000000"),
        (["OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "11"], "OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must not exceed OTEL_BSP_MAX_QUEUE_SIZE (10), got 11"),
        (["OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"], "OTEL_EXPORTER_OTLP_COMPRESSION: expected none, got 'gzip' (the exporter does not compress)"),
        (["OTEL_RESOURCE_ATTRIBUTES": "deployment.environment"], "OTEL_RESOURCE_ATTRIBUTES: expected key=value pairs separated by commas"),
    ])
    func anUnusableValueIsRefused(environment: [String: String], expected: String) {
        let found = problems(environment)
        #expect(found.count == 1)
        #expect(found.first?.hasPrefix(expected) == true, "\(found)")
    }

    @Test(.tags(.fast)) func theServiceNameMayComeFromTheResourceAttributesAndTheDisplayedEndpointHidesCredentials() throws {
        let named = try #require(
            try read([
                "OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.name=relais-fr",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://user:key@collector.example:4318/v1/traces?api_key=secret",
            ]))
        #expect(named.serviceName == "relais-fr")
        #expect(named.endpointForDisplay == "https://collector.example:4318/v1/traces")
        let both = try #require(try read(["OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "service.name=a", "OTEL_SERVICE_NAME": "b"]))
        #expect(both.serviceName == "b")
    }

    @Test(.tags(.fast)) func aMutualTLSPairThatCanBeReadIsAccepted() throws {
        #expect(
            problems(["OTEL_EXPORTER_OTLP_CLIENT_KEY": "/k.pem", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": "/c.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem"]).isEmpty)
    }

    @Test(.tags(.fast)) func theDropCounterKeepsTheWarningLevelWhateverOTELLogLevelSays() {
        var handler = SpanDropCounter(forwardingTo: SwiftLogNoOpLogHandler())
        handler.logLevel = .trace
        #expect(handler.logLevel == .warning)
        handler.logLevel = .critical
        #expect(handler.logLevel == .warning)
    }

    @Test(.tags(.fast)) func everyProblemIsReportedAtOnceWithoutRepeatingAHeaderValue() {
        let found = problems([
            "OTEL_TRACES_SAMPLER": "sometimes", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_HEADERS": "authorization:Bearer secret-value",
        ])
        #expect(found.count == 3)
        #expect(!found.joined().contains("secret-value"))
        #expect(!problems(["OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://user:secret-value@host"]).joined().contains("secret-value"))
        let error = TracingEnvironmentError(problems: found)
        #expect(error.description.hasPrefix("invalid tracing environment (3 problems):\n  OTEL_EXPORTER_OTLP_PROTOCOL"))
    }
}
