import ArgumentParser
import Logging
import RelaisServer
import RelaisTelemetry

#if canImport(Glibc)
import Glibc
#endif

/// The `OTEL_*` variables of this process; problems are printed like a configuration file's and
/// refuse the start (exit 2).
func readTracingEnvironment(defaultServiceName: String) throws -> TracingEnvironment? {
    do {
        return try TracingEnvironment.read(currentEnvironment(), defaultServiceName: defaultServiceName) { access($0, R_OK) == 0 }
    } catch {
        printError(error.description)
        throw ExitCode(2)
    }
}

/// The exporter for `serve` and `dev-provider`, or nil when traces are off.
func makeTracing(_ environment: TracingEnvironment?, logger: Logger) throws -> TracingBackend? {
    guard let environment else { return nil }
    let exporter = try TracingExporter.make(environment, logger: logger)
    // The endpoint is not logged: OTEL_EXPORTER_OTLP_*_ENDPOINT may carry credentials.
    logger.info("traces on: OTLP over HTTP", metadata: ["service_name": "\(environment.serviceName)", "sampler": "\(environment.sampler)"])
    return TracingBackend(tracer: exporter.tracer, service: exporter.service)
}
