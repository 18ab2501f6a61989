import Metrics
public import Prometheus

/// The process-wide Prometheus registry. swift-metrics can be bootstrapped once per process, so
/// the server and the tests share this one; every metric Relais records lands here.
public enum RelaisMetrics {
    public static let registry = PrometheusCollectorRegistry()

    private static let bootstrapped: Bool = {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Relais' latencies range from sub-millisecond (Redis) to seconds (providers).
        factory.defaultDurationHistogramBuckets = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        MetricsSystem.bootstrap(factory)
        return true
    }()

    /// Installs the Prometheus factory (idempotent).
    public static func bootstrap() {
        _ = bootstrapped
    }

    public static func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}
