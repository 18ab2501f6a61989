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

    /// The endpoint without userinfo, query or fragment, for output: those may carry credentials.
    public var endpointForDisplay: String {
        let scheme = endpoint.prefix { $0 != ":" }
        let rest = endpoint.dropFirst(scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@").last ?? ""
        let path = rest.dropFirst(authority.count).prefix { $0 != "?" && $0 != "#" }
        return "\(scheme)://\(host)\(path)"
    }

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
        "OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
    ]

    static let samplers: Set = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"]
    /// swift-otel 1.6 stops the process on any other (`baggage` included).
    static let propagators: Set = ["tracecontext", "none"]

    /// Reads the environment: nil when traces are off (no `OTEL_TRACES_EXPORTER`, `none`, or
    /// `OTEL_SDK_DISABLED=true`). With `OTEL_TRACES_EXPORTER` set, throws every problem found,
    /// each naming its variable.
    /// - Parameter defaultServiceName: `service.name` unless `OTEL_SERVICE_NAME` sets one.
    public static func read(
        _ environment: [String: String], defaultServiceName: String, fileIsReadable: (String) -> Bool = { _ in true }
    ) throws(TracingEnvironmentError) -> TracingEnvironment? {
        var reader = Reader(environment: environment)
        // Variables meant for other processes sharing the environment do not matter while traces
        // are off; once they are asked for, every one must parse.
        guard let exporter = environment["OTEL_TRACES_EXPORTER"], !exporter.isEmpty, exporter != "none" else { return nil }
        // swift-otel reads values as they are: an empty traces variable hides the shared one
        // (empty headers drop the credentials), a padded sampler name falls back to always-on.
        for name in variables {
            if let raw = environment[name], raw.isEmpty || raw.trimmingSpaces() != raw {
                reader.problem(name, "is set but empty or padded with spaces; unset it or remove the spaces")
            }
        }
        let disabled = reader.boolean("OTEL_SDK_DISABLED") ?? false
        if exporter != "otlp" {
            reader.problem("OTEL_TRACES_EXPORTER", "expected otlp or none, got '\(exporter)' (Relais exports OTLP over HTTP only)")
        }
        for name in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] {
            if let value = reader.value(name), value != "http/protobuf" {
                reader.problem(name, "expected http/protobuf, got '\(value)' (this build has no gRPC or JSON exporter)")
            }
        }
        for (general, traces) in [("CERTIFICATE", "TRACES_CERTIFICATE"), ("CLIENT_KEY", "TRACES_CLIENT_KEY"), ("CLIENT_CERTIFICATE", "TRACES_CLIENT_CERTIFICATE")] {
            for name in ["OTEL_EXPORTER_OTLP_\(general)", "OTEL_EXPORTER_OTLP_\(traces)"] {
                if let path = reader.value(name), !fileIsReadable(path) { reader.problem(name, "cannot read the file '\(path)'") }
            }
        }
        let key = reader.value("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY") ?? reader.value("OTEL_EXPORTER_OTLP_CLIENT_KEY")
        let certificate = reader.value("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE") ?? reader.value("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
        if (key == nil) != (certificate == nil) {
            reader.problem(key == nil ? "OTEL_EXPORTER_OTLP_CLIENT_KEY" : "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "a client certificate and its key go together")
        }
        let base = reader.url("OTEL_EXPORTER_OTLP_ENDPOINT")
        let traces = reader.url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] { reader.keyValueList(name) }
        reader.keyValueList("OTEL_RESOURCE_ATTRIBUTES")
        for name in ["OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"] {
            // swift-otel's HTTP exporter reads the setting but never compresses: gzip would be a silent no.
            if let value = reader.value(name), value != "none" { reader.problem(name, "expected none, got '\(value)' (the exporter does not compress)") }
        }
        // 0 would fail every export, or spin a core on the export timer; the queue is allocated
        // up front, so its size is bounded too.
        for name in ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT"] {
            _ = reader.integer(name, unit: "milliseconds", in: 1...3_600_000)
        }
        let queue = reader.integer("OTEL_BSP_MAX_QUEUE_SIZE", unit: "spans", in: 1...1_000_000) ?? 2048
        if let batch = reader.integer("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", unit: "spans", in: 1...1_000_000), batch > queue {
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
        let serviceName = reader.value("OTEL_SERVICE_NAME") ?? reader.resourceServiceName ?? defaultServiceName
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

    mutating func integer(_ name: String, unit: String, in range: ClosedRange<Int>) -> Int? {
        guard let value = value(name) else { return nil }
        guard let number = Int(value), range.contains(number) else {
            problem(name, "expected a whole number of \(unit) from \(range.lowerBound) to \(range.upperBound), got '\(value)'")
            return nil
        }
        return number
    }

    /// `service.name` from `OTEL_RESOURCE_ATTRIBUTES`, which stands when `OTEL_SERVICE_NAME` is unset.
    var resourceServiceName: String? {
        guard let attributes = value("OTEL_RESOURCE_ATTRIBUTES") else { return nil }
        for entry in attributes.split(separator: ",") {
            let pair = entry.split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].trimmingSpaces() == "service.name" {
                let name = pair[1].trimmingSpaces()
                if !name.isEmpty { return name }
            }
        }
        return nil
    }

    mutating func url(_ name: String) -> String? {
        guard let value = value(name) else { return nil }
        let lowered = value.lowercased()
        let rest = lowered.hasPrefix("http://") ? value.dropFirst(7) : lowered.hasPrefix("https://") ? value.dropFirst(8) : nil
        guard let rest, let first = rest.first, first != "/", first != "?", !value.contains(where: { $0 == " " || $0 == "#" }), Self.portIsNumeric(rest) else {
            // The value is not repeated: it may carry credentials.
            problem(name, "expected an http:// or https:// URL with a host (and a numeric port)")
            return nil
        }
        return value
    }

    /// After `host:` (or `[v6]:`) comes a number, or nothing at all.
    static func portIsNumeric(_ afterScheme: Substring) -> Bool {
        let authority = afterScheme.prefix { $0 != "/" && $0 != "?" }
        let hostPort = authority.split(separator: "@").last ?? authority
        let afterHost: Substring
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { return false }
            afterHost = hostPort[hostPort.index(after: close)...]
        } else {
            afterHost = hostPort.firstIndex(of: ":").map { hostPort[$0...] } ?? ""
        }
        guard !afterHost.isEmpty else { return true }
        let port = afterHost.dropFirst()
        return afterHost.first == ":" && !port.isEmpty && port.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// `key=value,key=value` (W3C Baggage shape), as the headers and resource attributes are written.
    mutating func keyValueList(_ name: String) {
        guard let value = value(name) else { return }
        for entry in value.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            // swift-otel drops the whole list on an empty value and logs it, credentials included.
            if pair.count != 2 || pair[0].trimmingSpaces().isEmpty || pair[1].trimmingSpaces().isEmpty {
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
