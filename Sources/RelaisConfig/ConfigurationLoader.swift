import Configuration
import Logging
import RelaisHTTPClient
import RelaisStore
import SystemPackage
import Yams

#if canImport(Glibc)
import Glibc
#endif

/// Reads the YAML file, lets `RELAIS_*` environment variables override any key, reads secrets from
/// files (`<key>_file`), and validates the result, collecting every problem before failing.
///
/// Layering is swift-configuration's (environment first, then the file, then built-in defaults);
/// the file's structure is also walked with Yams so that unknown keys are reported, with line numbers.
public enum ConfigurationLoader {
    public static let environmentPrefix = "RELAIS_"

    public static func load(
        filePath: String?,
        environment: [String: String]
    ) async throws(ConfigurationError) -> RelaisConfiguration {
        var problems: [ConfigProblem] = []
        var providers: [any ConfigProvider] = []

        let relaisVariables = environment.filter { $0.key.hasPrefix(environmentPrefix) }
        problems += checkEnvironmentNames(relaisVariables.keys)
        providers.append(EnvironmentVariablesProvider(
            environmentVariables: Dictionary(uniqueKeysWithValues: relaisVariables.map { (String($0.key.dropFirst(environmentPrefix.count)), $0.value) }),
            secretsSpecifier: .dynamic { key, _ in key.hasSuffix("PASSWORD") }
        ))

        if let filePath {
            switch readFile(filePath) {
            case .failure(let problem):
                throw ConfigurationError(problems: problems + [problem])
            case .success(let text):
                let structureProblems = checkStructure(yaml: text)
                problems += structureProblems
                if structureProblems.contains(where: { $0.keyPath == "(file)" }) {
                    throw ConfigurationError(problems: problems)
                }
                do {
                    providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(filePath)))
                } catch {
                    throw ConfigurationError(problems: problems + [ConfigProblem("(file)", "cannot read \(filePath): \(error)")])
                }
            }
        }

        var reader = ValueReader(config: ConfigReader(providers: providers))
        let configuration = reader.read()
        problems += reader.problems
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return configuration
    }

    // MARK: - Structure

    static func checkEnvironmentNames(_ names: some Sequence<String>) -> [ConfigProblem] {
        var known = Set<String>()
        for key in ConfigSchema.leafKeys { known.insert(ConfigSchema.environmentName(for: key)) }
        let openPrefixes = ConfigSchema.openSections.map { ConfigSchema.environmentName(for: $0) + "_" }
        return names.sorted().compactMap { name in
            if known.contains(name) || openPrefixes.contains(where: name.hasPrefix) { return nil }
            return ConfigProblem(name, "unknown environment variable (no configuration key maps to it)")
        }
    }

    static func checkStructure(yaml: String) -> [ConfigProblem] {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch {
            return [ConfigProblem("(file)", "not valid YAML: \(error)")]
        }
        guard let root else { return [] }  // an empty file is an empty configuration
        guard case .mapping = root else { return [ConfigProblem("(file)", "the top level must be a mapping of sections")] }
        var problems: [ConfigProblem] = []
        walk(root, path: "", problems: &problems)
        return problems
    }

    private static func walk(_ node: Node, path: String, problems: inout [ConfigProblem]) {
        guard case .mapping(let mapping) = node else { return }
        for (keyNode, value) in mapping {
            guard let key = keyNode.string else {
                problems.append(ConfigProblem(path.isEmpty ? "(file)" : path, "keys must be strings\(line(keyNode))"))
                continue
            }
            let child = path.isEmpty ? key : "\(path).\(key)"
            if ConfigSchema.openSections.contains(child) {
                if case .scalar(let scalar) = value, scalar.string.isEmpty || scalar.string == "null" || scalar.string == "~" { continue }
                guard case .mapping = value else {
                    problems.append(ConfigProblem(child, "expected a mapping keyed by id\(line(value))"))
                    continue
                }
            } else if ConfigSchema.leafKeys.contains(child) {
                if case .scalar = value { continue }
                problems.append(ConfigProblem(child, "expected a single value, not a list or mapping\(line(value))"))
            } else if ConfigSchema.sections.contains(child) {
                guard case .mapping = value else {
                    problems.append(ConfigProblem(child, "expected a mapping\(line(value))"))
                    continue
                }
                walk(value, path: child, problems: &problems)
            } else if !ConfigSchema.isUnderOpenSection(child) {
                let hint = ConfigSchema.suggestion(for: child).map { " (did you mean '\($0)'?)" } ?? ""
                problems.append(ConfigProblem(child, "unknown key\(hint)\(line(keyNode))"))
            }
        }
    }

    private static func line(_ node: Node) -> String {
        node.mark.map { " (line \($0.line))" } ?? ""
    }

    // MARK: - Files

    /// Reads a text file of at most 4 MiB (configuration, secrets, keys); the failure names the path.
    public static func readFile(_ path: String) -> Result<String, ConfigProblem> {
        guard let handle = fopen(path, "r") else {
            return .failure(ConfigProblem("(file)", "cannot open \(path): \(String(cString: strerror(errno)))"))
        }
        defer { fclose(handle) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = fread(&buffer, 1, buffer.count, handle)
            if count <= 0 { break }
            bytes += buffer[0..<count]
            if bytes.count > 4 << 20 {
                return .failure(ConfigProblem("(file)", "\(path) is larger than 4 MiB"))
            }
        }
        return .success(String(decoding: bytes, as: UTF8.self))
    }
}
