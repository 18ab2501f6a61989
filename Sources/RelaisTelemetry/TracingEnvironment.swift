/// The `OTEL_*` variables that shape Relais' traces, checked before anything starts.
///
/// Traces are off unless `OTEL_TRACES_EXPORTER=otlp`. swift-otel reads the variables itself, but a
/// value it cannot parse is only logged and replaced by its default (a typo in the sampler ratio
/// would sample everything), and a few values stop the process (`grpc`, which this build does not
/// include). So every variable below is parsed here first, and any problem refuses the start as an
/// invalid configuration file does.
public struct TracingEnvironment: Sendable, Equatable {
    /// Where spans are posted: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, or the OTLP default.
    public let endpoint: String
    public let serviceName: String
    public let sampler: String

    /// The variables read, in the order the operator's guide lists them.
    public static let variables = [
        "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_PROPAGATORS",
        "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    ]

    static let samplers: Set = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"]
    /// swift-otel 1.6 stops the process on any other (`baggage` included).
    static let propagators: Set = ["tracecontext", "none"]

    /// Reads the environment: nil when traces are off (no `OTEL_TRACES_EXPORTER`, `none`, or
    /// `OTEL_SDK_DISABLED=true`). With `OTEL_TRACES_EXPORTER` set, throws every problem found,
    /// each naming its variable.
    /// - Parameter defaultServiceName: `service.name` unless `OTEL_SERVICE_NAME` sets one.
    public static func read(_ environment: [String: String], defaultServiceName: String) throws(TracingEnvironmentError) -> TracingEnvironment? {
        var reader = Reader(environment: environment)
        // Variables meant for other processes sharing the environment do not matter while traces
        // are off; once they are asked for, every one must parse.
        guard let exporter = reader.value("OTEL_TRACES_EXPORTER"), exporter != "none" else { return nil }
        let disabled = reader.boolean("OTEL_SDK_DISABLED") ?? false
        if exporter != "otlp" {
            reader.problem("OTEL_TRACES_EXPORTER", "expected otlp or none, got '\(exporter)' (Relais exports OTLP over HTTP only)")
        }
        for name in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            if let value = reader.value(name), value != "http/protobuf" {
                reader.problem(name, "expected http/protobuf, got '\(value)' (this build has no gRPC or JSON exporter)")
            }
        }
        let base = reader.url("OTEL_EXPORTER_OTLP_ENDPOINT")
        let traces = reader.url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] { reader.keyValueList(name) }
        reader.keyValueList("OTEL_RESOURCE_ATTRIBUTES")
        for name in ["OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"] {
            // swift-otel's HTTP exporter reads the setting but never compresses: gzip would be a silent no.
            if let value = reader.value(name), value != "none" { reader.problem(name, "expected none, got '\(value)' (the exporter does not compress)") }
        }
        for name in ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT"] {
            _ = reader.integer(name, unit: "milliseconds", minimum: 0)
        }
        let queue = reader.integer("OTEL_BSP_MAX_QUEUE_SIZE", unit: "spans", minimum: 1) ?? 2048
        if let batch = reader.integer("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", unit: "spans", minimum: 1), batch > queue {
            reader.problem("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "must not exceed OTEL_BSP_MAX_QUEUE_SIZE (\(queue)), got \(batch)")
        }
        let sampler = reader.value("OTEL_TRACES_SAMPLER") ?? "parentbased_always_on"
        if !samplers.contains(sampler) {
            reader.problem("OTEL_TRACES_SAMPLER", "expected one of \(samplers.sorted().joined(separator: ", ")), got '\(sampler)'")
        }
        if let argument = reader.value("OTEL_TRACES_SAMPLER_ARG"), sampler.hasSuffix("traceidratio") {
            if Double(argument).map({ (0...1).contains($0) }) != true {
                reader.problem("OTEL_TRACES_SAMPLER_ARG", "expected a ratio between 0 and 1, got '\(argument)'")
            }
        }
        if let list = reader.value("OTEL_PROPAGATORS") {
            let unknown = list.split(separator: ",").map { $0.trimmingSpaces() }.filter { !propagators.contains($0) }
            if !unknown.isEmpty { reader.problem("OTEL_PROPAGATORS", "expected tracecontext or none, got '\(unknown.joined(separator: ","))'") }
        }
        guard reader.problems.isEmpty else { throw TracingEnvironmentError(problems: reader.problems) }
        guard !disabled else { return nil }
        let endpoint = traces ?? ((base.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } ?? "http://localhost:4318") + "/v1/traces")
        let serviceName = reader.value("OTEL_SERVICE_NAME") ?? defaultServiceName
        return TracingEnvironment(endpoint: endpoint, serviceName: serviceName, sampler: sampler)
    }
}

/// Every problem of the `OTEL_*` variables, one `VARIABLE: message` line each.
public struct TracingEnvironmentError: Error, Equatable, CustomStringConvertible {
    public let problems: [String]

    public var description: String {
        "invalid tracing environment (\(problems.count) problem\(problems.count == 1 ? "" : "s")):\n" + problems.map { "  \($0)" }.joined(separator: "\n")
    }
}

private struct Reader {
    let environment: [String: String]
    var problems: [String] = []

    /// An empty variable counts as unset, as the OpenTelemetry specification says.
    func value(_ name: String) -> String? {
        guard let value = environment[name]?.trimmingSpaces(), !value.isEmpty else { return nil }
        return value
    }

    mutating func problem(_ name: String, _ message: String) { problems.append("\(name): \(message)") }

    mutating func boolean(_ name: String) -> Bool? {
        guard let value = value(name) else { return nil }
        switch value.lowercased() {
        case "true": return true
        case "false": return false
        default:
            problem(name, "expected true or false, got '\(value)'")
            return nil
        }
    }

    mutating func integer(_ name: String, unit: String, minimum: Int) -> Int? {
        guard let value = value(name) else { return nil }
        guard let number = Int(value), number >= minimum else {
            problem(name, "expected a whole number of \(unit) of at least \(minimum), got '\(value)'")
            return nil
        }
        return number
    }

    mutating func url(_ name: String) -> String? {
        guard let value = value(name) else { return nil }
        let lowered = value.lowercased()
        let rest = lowered.hasPrefix("http://") ? value.dropFirst(7) : lowered.hasPrefix("https://") ? value.dropFirst(8) : nil
        guard let rest, let first = rest.first, first != "/", first != "?", !value.contains(where: { $0 == " " || $0 == "#" }) else {
            problem(name, "expected an http:// or https:// URL, got '\(value)'")
            return nil
        }
        return value
    }

    /// `key=value,key=value` (W3C Baggage shape), as the headers and resource attributes are written.
    mutating func keyValueList(_ name: String) {
        guard let value = value(name) else { return }
        for entry in value.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if pair.count != 2 || pair[0].trimmingSpaces().isEmpty {
                // The entry itself is not repeated: it may hold a credential (an Authorization header).
                problem(name, "expected key=value pairs separated by commas")
                return
            }
        }
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var start = startIndex, end = endIndex
        while start < end, self[start] == " " { start = index(after: start) }
        while end > start, self[index(before: end)] == " " { end = index(before: end) }
        return String(self[start..<end])
    }
}
