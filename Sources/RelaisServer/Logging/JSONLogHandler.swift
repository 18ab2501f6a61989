import FoundationEssentials
public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Writes one JSON object per line to standard output: `{"ts":…,"level":…,"label":…,"msg":…,…metadata}`.
/// For log shippers; ``TextLogHandler`` writes the text format.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String

    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = "{\"ts\":\(Self.quoted(Self.timestamp())),\"level\":\(Self.quoted(event.level.rawValue)),\"label\":\(Self.quoted(label)),\"msg\":\(Self.quoted(event.message.description))"
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) where !["ts", "level", "label", "msg"].contains(key) {
            line += ",\(Self.quoted(key)):\(Self.encode(value))"
        }
        line += "}\n"
        LogText.writeToStandardOutput(line)
    }

    static func encode(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string): quoted(string)
        case .stringConvertible(let convertible): quoted(convertible.description)
        case .array(let values): "[" + values.map(encode).joined(separator: ",") + "]"
        case .dictionary(let dictionary):
            "{" + dictionary.sorted { $0.key < $1.key }.map { "\(quoted($0.key)):\(encode($0.value))" }.joined(separator: ",") + "}"
        }
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func quoted(_ string: String) -> String {
        "\"" + LogText.escaped(string, quotes: true) + "\""
    }

    /// RFC 3339 UTC with milliseconds. Calendar fields are computed here (Howard Hinnant's
    /// days-to-civil algorithm) rather than with `gmtime_r`: `timespec` and `tm` are claimed by
    /// different C modules depending on build order, which breaks release builds.
    static func timestamp(_ now: Double = Date().timeIntervalSince1970) -> String {
        let totalMilliseconds = Int64((now * 1000).rounded(.down))
        let milliseconds = Int(totalMilliseconds % 1000)
        let totalSeconds = totalMilliseconds / 1000
        let days = totalSeconds / 86400
        let secondsOfDay = Int(totalSeconds % 86400)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0))
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T"
            + "\(pad(secondsOfDay / 3600, 2)):\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2)).\(pad(milliseconds, 3))Z"
    }
}
