public import Logging
import Metrics
import OTel
public import ServiceLifecycle
public import Tracing

/// The OTLP/HTTP span exporter (swift-otel), for traces only: Relais' metrics stay on Prometheus
/// and its logs on standard output.
///
/// Spans wait in the batch processor's bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048 by default)
/// and are posted every `OTEL_BSP_SCHEDULE_DELAY`; a request never waits for the collector. When
/// the queue is full, spans are dropped and counted in `relais_trace_spans_dropped_total`.
public enum TracingExporter {
    /// A tracer not installed globally: Relais hands it to what traces (server, store, client), so
    /// tests can run several in one process.
    /// - Parameter logger: receives the exporter's own warnings (a collector that cannot be
    ///   reached, dropped spans) at warning level.
    public static func make(_ environment: TracingEnvironment, logger: Logger) throws -> (tracer: any Tracer, service: any Service) {
        var configuration = OTel.Configuration.default
        configuration.serviceName = environment.serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.diagnosticLogLevel = .warning
        let handler = logger.handler
        configuration.diagnosticLogger = .custom(Logger(label: "relais.otel") { _ in SpanDropCounter(forwardingTo: handler) })
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        return (backend.factory, backend.service)
    }
}

/// Counts the spans swift-otel's batch processor dropped. It exposes no counter of its own: each
/// export round with drops logs one warning whose `dropped_count` says how many, which this handler
/// adds to `relais_trace_spans_dropped_total` before passing the line on.
struct SpanDropCounter: LogHandler {
    static let dropped = Counter(label: "relais_trace_spans_dropped_total")
    var base: any LogHandler

    init(forwardingTo base: any LogHandler) { self.base = base }

    /// Always warning, whatever `OTEL_LOG_LEVEL` says: below it swift-otel logs its configuration,
    /// header values included; above it the drop warnings this counter reads would be filtered out.
    var logLevel: Logger.Level {
        get { .warning }
        set {}
    }
    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }
    var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        if case .string(let text) = event.metadata?["dropped_count"], let count = Int(text), count > 0 {
            Self.dropped.increment(by: count)
        }
        base.log(event: event)
    }
}
