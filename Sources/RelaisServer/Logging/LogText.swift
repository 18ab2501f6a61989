import FoundationEssentials
import Logging
import RelaisClock
import RelaisCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Escaping, formatting and output for ``LineLogHandler``.
public enum LogText {
    /// The string with backslashes and every character that could break or disguise a log line
    /// escaped: C0 and C1 controls and DEL (`\n`, `\r`, `\t`, else `\uXXXX`), the Unicode line and
    /// paragraph separators, and the bidirectional overrides and isolates. The result is also a
    /// valid JSON string body when `quotes` escapes `"` too.
    public static func escaped(_ string: String, quotes: Bool = false) -> String {
        var output = ""
        output.reserveCapacity(string.utf8.count)
        appendEscaped(string, quotes: quotes, to: &output)
        return output
    }

    /// ``escaped(_:quotes:)`` written at the end of `output`: a line is built in one string. Read as
    /// UTF-8 and copied a run at a time: only 0xC2 and 0xE2 lead the multibyte scalars it escapes.
    /// (Appending scalar by scalar made a String per scalar, 370 per sign-in for its two events.)
    public static func appendEscaped(_ string: String, quotes: Bool = false, to output: inout String) {
        // Most text is printable ASCII without a backslash: a vectorised pass and a `memchr` or two
        // find that, and it is appended whole (stepping through the UTF-8 view by index cost
        // 23,000 instructions per sign-in for its two security events).
        var copy = string
        let plain = copy.withUTF8 { bytes in
            let (lowest, highest) = ByteScan.extremes(of: bytes)
            return lowest >= 0x20 && highest < 0x7F && ByteScan.firstIndex(of: 0x5C, in: bytes) == nil
                && !(quotes && ByteScan.firstIndex(of: 0x22, in: bytes) != nil)
        }
        if plain {
            output += string
            return
        }
        let utf8 = string.utf8
        var runStart = utf8.startIndex
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            var scalar: UInt32?
            var width = 1
            switch byte {
            case 0x5C, 0x7F, 0..<0x20: scalar = UInt32(byte)
            case 0x22 where quotes: scalar = 0x22
            case 0xC2:  // U+0080 to U+00BF, the C1 controls up to U+009F (a String's UTF-8 is valid)
                width = 2
                let next = utf8[utf8.index(after: index)]
                if next <= 0x9F { scalar = UInt32(next) }
            case 0xE2:  // U+2000 to U+2FFF
                width = 3
                let second = utf8.index(after: index)
                let value = 0x2000 | UInt32(utf8[second] & 0x3F) << 6 | UInt32(utf8[utf8.index(after: second)] & 0x3F)
                if (0x2028...0x202E).contains(value) || (0x2066...0x2069).contains(value) { scalar = value }
            default: break
            }
            let next = utf8.index(index, offsetBy: width)
            if let scalar {
                // Sliced as scalars: a String's own range subscript would round to Characters, and a
                // combining mark after an escaped quote starts no Character.
                output += Substring(string.unicodeScalars[runStart..<index])
                appendEscape(of: scalar, to: &output)
                runStart = next
            }
            index = next
        }
        output += Substring(string.unicodeScalars[runStart...])
    }

    private static let hexDigits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]

    private static func appendEscape(of scalar: UInt32, to output: inout String) {
        switch scalar {
        case 0x5C: output += "\\\\"
        case 0x22: output += "\\\""
        case 0x0A: output += "\\n"
        case 0x0D: output += "\\r"
        case 0x09: output += "\\t"
        default:
            output += "\\u"
            for shift: UInt32 in [12, 8, 4, 0] { output.append(hexDigits[Int(scalar >> shift & 0xF)]) }
        }
    }

    /// ``quoted(_:)`` written at the end of `output`.
    public static func appendQuoted(_ string: String, to output: inout String) {
        output += "\""
        appendEscaped(string, quotes: true, to: &output)
        output += "\""
    }

    /// One write(2) per line, so lines from concurrent requests do not interleave.
    @Sendable public static func writeToStandardOutput(_ line: String) { write(line, to: STDOUT_FILENO) }

    /// Writes all of `line` to `descriptor`, in one write(2) unless the kernel takes less; false
    /// when the descriptor refuses it (closed, disk full).
    @discardableResult
    public static func write(_ line: String, to descriptor: Int32) -> Bool {
        var line = line
        return line.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0, errno == EINTR { continue }
                if written <= 0 { return false }
                offset += written
            }
            return true
        }
    }

    /// A metadata value for the text format: bare when unambiguous, quoted when empty or holding a
    /// space, a quote or an `=`.
    static func text(_ value: Logger.Metadata.Value) -> String {
        let text =
            switch value {
            case .string(let string): string
            case .stringConvertible(let convertible): convertible.description
            case .array, .dictionary: value.description
            }
        guard text.isEmpty || text.unicodeScalars.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) else { return escaped(text) }
        return "\"" + escaped(text, quotes: true) + "\""
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    public static func quoted(_ string: String) -> String {
        var output = ""
        output.reserveCapacity(string.utf8.count + 2)
        appendQuoted(string, to: &output)
        return output
    }

    /// A metadata value as JSON: strings quoted, arrays and dictionaries (keys sorted) as such.
    static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string): quoted(string)
        case .stringConvertible(let convertible): quoted(convertible.description)
        case .array(let values): "[" + values.map(json).joined(separator: ",") + "]"
        case .dictionary(let dictionary):
            "{" + dictionary.sorted { $0.key < $1.key }.map { "\(quoted($0.key)):\(json($0.value))" }.joined(separator: ",") + "}"
        }
    }

    /// The current time, RFC 3339 UTC with milliseconds (log lines).
    static func timestamp() -> String { timestamp(SystemClock().now) }

    /// RFC 3339 UTC with milliseconds. Calendar fields are computed here (Howard Hinnant's
    /// days-to-civil algorithm) rather than with `gmtime_r`: `timespec` and `tm` are claimed by
    /// different C modules depending on build order, which breaks release builds.
    public static func timestamp(_ now: Double) -> String {
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
