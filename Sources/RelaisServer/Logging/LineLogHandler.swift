public import Logging

/// Writes one line per event to standard output (one write(2) each, so lines from concurrent
/// requests never interleave), in one of two formats:
/// - `json`: one object per line, `{"ts":…,"level":…,"label":…,"msg":…,…metadata}`, for log shippers;
/// - `text`: logfmt-like, `2026-11-24T01:20:42.123Z warning relais.relay: message key=value key="two words"`.
///
/// Message, keys and values are escaped in both (``LogText/escaped(_:quotes:)``): a provider's
/// `error_description` or any other request-borne string can never start a line of its own or
/// hide what follows.
public struct LineLogHandler: LogHandler {
    public enum Format: Sendable { case json, text }

    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let format: Format
    private let output: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level, format: Format, output: @escaping @Sendable (String) -> Void = LogText.writeToStandardOutput) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let fields = merged.sorted { $0.key < $1.key }
        let timestamp = LogText.timestamp()
        switch format {
        case .json:
            var line =
                "{\"ts\":\(LogText.quoted(timestamp)),\"level\":\(LogText.quoted(event.level.rawValue)),\"label\":\(LogText.quoted(label)),\"msg\":\(LogText.quoted(event.message.description))"
            for (key, value) in fields where !["ts", "level", "label", "msg"].contains(key) {
                line += ",\(LogText.quoted(key)):\(LogText.json(value))"
            }
            output(line + "}\n")
        case .text:
            var line = "\(timestamp) \(event.level.rawValue) \(LogText.escaped(label)): \(LogText.escaped(event.message.description))"
            for (key, value) in fields { line += " \(LogText.escaped(key))=\(LogText.text(value))" }
            output(line + "\n")
        }
    }
}
