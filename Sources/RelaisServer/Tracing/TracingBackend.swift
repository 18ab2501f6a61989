public import ServiceLifecycle
public import Tracing

/// A tracer and the service that exports its spans (the OTLP exporter, `RelaisTelemetry`). The
/// service runs first in the service group, so it stops last and flushes the spans of the drain.
public struct TracingBackend: Sendable {
    public let tracer: any Tracer
    public let service: any Service

    public init(tracer: any Tracer, service: any Service) {
        self.tracer = tracer
        self.service = service
    }
}
