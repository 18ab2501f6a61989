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
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" || first == "\n" || first == "\r" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" || last == "\n" || last == "\r" { slice.removeLast() }
        return String(slice)
    }
}
