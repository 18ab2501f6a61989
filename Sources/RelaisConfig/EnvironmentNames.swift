/// Which configuration key a `RELAIS_*` environment variable overrides, so that a mistyped one is
/// an error rather than silently ignored.
///
/// A variable under a keyed section (`RELAIS_PROVIDERS_FC_CLIENT_ID`) names an entry of the file
/// and one of that entry's keys. swift-configuration spells an id as it spells any key component:
/// upper case, `-` (any character but a letter or digit) as `_`, and `_` between a lower-case
/// letter and an upper-case one (`myApp` → `MY_APP`). The variable must match exactly one pair of
/// an id the file defines and a key such an entry may hold: ids that only differ in that spelling
/// (`my-app` and `my_app`), or an id and a key that split two ways, make a variable that would
/// override several keys at once, which is refused.
extension ConfigSchema {
    func checkEnvironmentNames(_ names: some Sequence<String>, keyedIDs: [String: [String]]?) -> [ConfigProblem] {
        var known = Set<String>()
        for key in leafKeys.union(listKeys) { known.insert(environmentName(for: key)) }
        let sections = keyedSections.keys.sorted()
        return names.sorted().compactMap { name in
            if known.contains(name) { return nil }
            guard let section = sections.first(where: { name.hasPrefix(environmentName(for: $0) + "_") }) else {
                return ConfigProblem(name, "unknown environment variable (no configuration key maps to it)")
            }
            // Without the file's ids (the file could not be read), entries cannot be told apart.
            guard let keyedIDs else { return nil }
            return checkKeyed(name, section: section, ids: keyedIDs[section] ?? [])
        }
    }

    private func checkKeyed(_ name: String, section: String, ids: [String]) -> ConfigProblem? {
        let rest = name.dropFirst(environmentName(for: section).count + 1)
        let entrySchema = keyedSections[section] ?? nil
        let keys = entrySchema.map { $0.leafKeys.union($0.listKeys).sorted() }
        var matches: [String] = []
        var named: [String] = []
        for id in Set(ids).sorted() {
            let idName = Self.environmentComponent(id) + "_"
            guard rest.hasPrefix(idName) else { continue }
            named.append(id)
            let keyName = rest.dropFirst(idName.count)
            guard let keys else {
                matches.append("\(section).\(id).\(keyName.lowercased())")
                continue
            }
            for key in keys where key.replacingDotsWithUnderscores().uppercased() == keyName { matches.append("\(section).\(id).\(key)") }
        }
        if matches.count == 1 { return nil }
        if matches.count > 1 {
            return ConfigProblem(
                name,
                "names several keys at once (\(matches.joined(separator: ", "))): rename an id so that each spells differently "
                    + "in upper case with '_' for '-', or set the key in the file")
        }
        guard let id = named.first, let keys else {
            let known = ids.isEmpty ? "the file defines none" : "the file defines \(Set(ids).sorted().joined(separator: ", "))"
            return ConfigProblem(name, "no entry of \(section) maps to it (\(known)); a variable only overrides a key of an entry the file defines")
        }
        let keyName = String(rest.dropFirst(Self.environmentComponent(id).count + 1)).lowercased()
        let byName = Dictionary(keys.map { ($0.replacingDotsWithUnderscores(), $0) }, uniquingKeysWith: { first, _ in first })
        let hint = Self.closest(to: keyName, among: Set(byName.keys)).map { " (did you mean \(environmentName(for: "\(section).\(id).\($0)"))?)" } ?? ""
        return ConfigProblem(name, "no key of \(section).\(id) maps to it\(hint)")
    }

    /// An id as swift-configuration spells it in a variable name (its `EnvironmentKeyEncoder`).
    static func environmentComponent(_ id: String) -> String {
        var result = ""
        var previous: Character?
        for character in id {
            if let previous, previous.isLowercase, character.isUppercase { result.append("_") }
            result += character.isLetter || character.isNumber ? character.uppercased() : "_"
            previous = character
        }
        return result
    }
}
