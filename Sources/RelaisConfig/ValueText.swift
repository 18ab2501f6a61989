// Text forms of configuration values shared by the readers: durations (`30s`, `10m`) and trimming.

enum DurationText {
    static func parse(_ text: String) -> Duration? {
        let units: [(String, (Int) -> Duration)] = [
            ("ms", { .milliseconds($0) }), ("s", { .seconds($0) }), ("m", { .seconds($0 * 60) }), ("h", { .seconds($0 * 3600) }),
            ("d", { .seconds($0 * 86400) }),
        ]
        for (suffix, make) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count).trimmingSpaces()
            guard let value = Int(number), value >= 0, value < 1_000_000_000 else { return nil }
            return make(value)
        }
        return nil
    }

    /// The shortest exact form ``parse(_:)`` reads back: `90s`, `5m`, `1500ms`.
    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        guard attoseconds == 0 else { return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000)ms" }
        for (suffix, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60)] where seconds != 0 && seconds % size == 0 { return "\(seconds / size)\(suffix)" }
        return "\(seconds)s"
    }
}

/// Sizes in bytes with binary units: `512KiB`, `8MiB`, `1GiB`, or a plain number of bytes.
public enum ByteSizeText {
    static let units: [(suffix: String, shift: Int)] = [("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)]

    static func parse(_ text: String) -> Int? {
        var number = Substring(text.trimmingSpaces()), shift = 0
        if let unit = units.first(where: { number.hasSuffix($0.suffix) }) {
            number = Substring(number.dropLast(unit.suffix.count).trimmingSpaces())
            shift = unit.shift
        }
        // Digits only (no sign, no exponent). `<<` would drop overflowing bits silently and turn a
        // huge size into a small one: multiply, and refuse an overflow.
        guard !number.isEmpty, number.utf8.count <= 12, number.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(number) else { return nil }
        let (bytes, overflow) = value.multipliedReportingOverflow(by: 1 << shift)
        return overflow ? nil : bytes
    }

    /// The largest exact binary unit: `1GiB`, `6MiB`, `1536B`.
    public static func format(_ bytes: Int) -> String {
        for unit in units where unit.shift > 0 && bytes >= 1 << unit.shift && bytes % (1 << unit.shift) == 0 {
            return "\(bytes >> unit.shift)\(unit.suffix)"
        }
        return "\(bytes)B"
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" || first == "\n" || first == "\r" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" || last == "\n" || last == "\r" { slice.removeLast() }
        return String(slice)
    }
}
