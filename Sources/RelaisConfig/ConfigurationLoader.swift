import Configuration
import Logging
import RelaisHTTPClient
public import RelaisJOSE
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
    public static let environmentPrefix = ConfigSchema.relay.environmentPrefix

    /// Loads `relais serve`'s configuration. `generateKey` makes the development decryption keys
    /// (``ProviderSettings/decryptionKeysGenerated``).
    public static func load(
        filePath: String?,
        environment: [String: String],
        generateKey: @escaping KeyGenerator = JWK.freshKey
    ) async throws(ConfigurationError) -> RelaisConfiguration {
        try await load(filePath: filePath, environment: environment, schema: .relay, generateKey: generateKey) { reader, source in
            var configuration = reader.readRelay(ids: source.ids(in:))
            configuration.warnings = source.warnings + configuration.warnings
            return configuration
        }
    }

    /// Loads `relais dev-provider`'s configuration (environment prefix `DEV_PROVIDER_`).
    public static func loadDevProvider(
        filePath: String?,
        environment: [String: String]
    ) async throws(ConfigurationError) -> DevProviderConfiguration {
        try await load(filePath: filePath, environment: environment, schema: .devProvider) { reader, source in
            reader.readDevProvider(clientIDs: source.ids(in: "clients"))
        }
    }

    /// Opens the file and environment against `schema`, reads them, and reports every problem of
    /// both steps at once.
    private static func load<Value>(
        filePath: String?, environment: [String: String], schema: ConfigSchema, generateKey: @escaping KeyGenerator = JWK.freshKey,
        read: (inout ValueReader, ConfigSource) -> Value
    ) async throws(ConfigurationError) -> Value {
        let source = try await ConfigSource.open(filePath: filePath, environment: environment, schema: schema)
        var reader = ValueReader(config: source.reader, generateKey: generateKey)
        let value = read(&reader, source)
        let problems = source.problems + reader.problems
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return value
    }
}

/// A configuration's sources, layered the swift-configuration way (environment first, then the
/// file, then built-in defaults), and the file's structure checked against a schema.
struct ConfigSource {
    let reader: ConfigReader
    /// Ids of the entries of each keyed section, in file order.
    let keyedIDs: [String: [String]]
    let problems: [ConfigProblem]
    /// What was set aside without failing, for the start-up log.
    let warnings: [String]

    func ids(in section: String) -> [String] { keyedIDs[section] ?? [] }

    static func open(filePath: String?, environment: [String: String], schema: ConfigSchema) async throws(ConfigurationError) -> ConfigSource {
        var problems: [ConfigProblem] = []
        var providers: [any ConfigProvider] = []

        var ours = environment.filter { $0.key.hasPrefix(schema.environmentPrefix) }
        // Kubernetes' service-link variables share the prefix when a Service is named like the
        // program: set aside with a warning, never read, never a reason to refuse to start.
        let serviceLinks = ours.filter { ServiceLinks.isServiceLink(name: $0.key, value: $0.value) }.keys.sorted()
        for name in serviceLinks { ours[name] = nil }
        var warnings: [String] = []
        if !serviceLinks.isEmpty {
            warnings.append(
                "ignored \(serviceLinks.count) Kubernetes service-link variable(s) (\(serviceLinks.joined(separator: ", "))); "
                    + "set enableServiceLinks: false in the pod spec to stop Kubernetes from injecting them"
            )
        }
        providers.append(
            EnvironmentVariablesProvider(
                environmentVariables: Dictionary(uniqueKeysWithValues: ours.map { (String($0.key.dropFirst(schema.environmentPrefix.count)), $0.value) }),
                secretsSpecifier: .dynamic { key, _ in key.hasSuffix("PASSWORD") || key.hasSuffix("SECRET") || key.hasSuffix("SALT") }
            ))

        var keyedIDs: [String: [String]] = [:]
        if let filePath {
            switch ConfigurationLoader.readFile(filePath) {
            case .failure(let problem):
                throw ConfigurationError(problems: schema.checkEnvironmentNames(ours.keys, keyedIDs: nil) + [problem])
            case .success(let text):
                let structure = checkStructure(yaml: text, schema: schema)
                problems += structure.problems
                keyedIDs = structure.keyedIDs
                if structure.problems.contains(where: { $0.keyPath == "(file)" }) {
                    throw ConfigurationError(problems: schema.checkEnvironmentNames(ours.keys, keyedIDs: nil) + problems)
                }
                do {
                    providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(filePath)))
                } catch {
                    throw ConfigurationError(
                        problems: schema.checkEnvironmentNames(ours.keys, keyedIDs: keyedIDs) + problems
                            + [ConfigProblem("(file)", "cannot read \(filePath): \(yamlProblem(error))")])
                }
            }
        }
        problems = schema.checkEnvironmentNames(ours.keys, keyedIDs: keyedIDs) + problems
        return ConfigSource(reader: ConfigReader(providers: providers), keyedIDs: keyedIDs, problems: problems, warnings: warnings)
    }

    // MARK: - Structure

    /// Where a YAML document is broken and how, without a word of its text: Yams' own description
    /// quotes the offending line, which may hold a secret (`client_secret: s3cr3t: x`).
    static func yamlProblem(_ error: any Error) -> String {
        func at(_ mark: Mark) -> String { "line \(mark.line), column \(mark.column)" }
        guard let error = error as? YamlError else { return "\(error)" }  // swift-configuration's: key paths only
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _), .composer(let context, let problem, let mark, _):
            return "\(problem) at \(at(mark))" + (context.map { " (\($0.text) at \(at($0.mark)))" } ?? "")
        case .reader(let problem, let offset, _, _):
            return problem + (offset.map { " at character \($0 + 1)" } ?? "")
        case .duplicatedKeysInMapping(_, let context):
            return "a key appears twice in one mapping (\(context.text) at \(at(context.mark)))"
        default:
            return "the document cannot be read"
        }
    }

    static func checkStructure(yaml: String, schema: ConfigSchema) -> (problems: [ConfigProblem], keyedIDs: [String: [String]]) {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch {
            return ([ConfigProblem("(file)", "not valid YAML: \(yamlProblem(error))")], [:])
        }
        guard let root else { return ([], [:]) }  // an empty file is an empty configuration
        guard case .mapping = root else { return ([ConfigProblem("(file)", "the top level must be a mapping of sections")], [:]) }
        var walker = StructureWalker(schema: schema)
        walker.walk(root, path: "")
        return (walker.problems, walker.keyedIDs)
    }
}

/// Walks the YAML tree against the schema, collecting problems (with line numbers) and the ids of
/// keyed sections' entries.
private struct StructureWalker {
    let schema: ConfigSchema
    let sections: Set<String>
    var problems: [ConfigProblem] = []
    var keyedIDs: [String: [String]] = [:]

    init(schema: ConfigSchema) {
        self.schema = schema
        sections = schema.sections
    }

    mutating func walk(_ node: Node, path: String) {
        guard case .mapping(let mapping) = node else { return }
        for (keyNode, value) in mapping {
            guard let key = keyNode.string else {
                problems.append(ConfigProblem(path.isEmpty ? "(file)" : path, "keys must be strings\(Self.line(keyNode))"))
                continue
            }
            let child = path.isEmpty ? key : "\(path).\(key)"
            if let entrySchema = schema.keyedSections[child] {
                if case .scalar(let scalar) = value, Self.isNull(scalar) { continue }
                guard case .mapping(let entries) = value else {
                    problems.append(ConfigProblem(child, "expected a mapping keyed by id\(Self.line(value))"))
                    continue
                }
                for (idNode, entry) in entries {
                    guard let id = idNode.string, Self.isValidID(id) else {
                        problems.append(ConfigProblem(child, "ids may hold only letters, digits, '-' and '_'\(Self.line(idNode))"))
                        continue
                    }
                    keyedIDs[child, default: []].append(id)
                    if let entrySchema { check(entry: entry, path: "\(child).\(id)", schema: entrySchema) }
                }
            } else if schema.leafKeys.contains(child) {
                if case .scalar = value { continue }
                problems.append(ConfigProblem(child, "expected a single value, not a list or mapping\(Self.line(value))"))
            } else if schema.listKeys.contains(child) {
                checkList(value, path: child)
            } else if sections.contains(child) {
                if case .scalar(let scalar) = value, Self.isNull(scalar) { continue }  // a section left empty
                guard case .mapping = value else {
                    problems.append(ConfigProblem(child, "expected a mapping\(Self.line(value))"))
                    continue
                }
                walk(value, path: child)
            } else if !schema.keyedSections.keys.contains(where: { child.hasPrefix($0 + ".") }) {
                let hint = schema.suggestion(for: child).map { " (did you mean '\($0)'?)" } ?? ""
                problems.append(ConfigProblem(child, "unknown key\(hint)\(Self.line(keyNode))"))
            }
        }
    }

    /// An entry's settings; a group inside an entry (`apps.<id>.android.package_name`) is walked
    /// with `prefix` naming it.
    private mutating func check(entry: Node, path: String, schema entrySchema: ConfigSchema.KeyedSection, prefix: String = "") {
        guard case .mapping(let mapping) = entry else {
            problems.append(ConfigProblem(path + (prefix.isEmpty ? "" : "." + prefix.dropLast()), "expected a mapping of settings\(Self.line(entry))"))
            return
        }
        for (keyNode, value) in mapping {
            let key = prefix + (keyNode.string ?? "")
            if entrySchema.leafKeys.contains(key) {
                if case .scalar = value { continue }
                problems.append(ConfigProblem("\(path).\(key)", "expected a single value, not a list or mapping\(Self.line(value))"))
            } else if entrySchema.listKeys.contains(key) {
                checkList(value, path: "\(path).\(key)")
            } else if entrySchema.leafKeys.union(entrySchema.listKeys).contains(where: { $0.hasPrefix(key + ".") }) {
                if case .scalar(let scalar) = value, Self.isNull(scalar) { continue }
                check(entry: value, path: path, schema: entrySchema, prefix: key + ".")
            } else {
                let hint = ConfigSchema.closest(to: key, among: entrySchema.leafKeys.union(entrySchema.listKeys)).map { " (did you mean '\($0)'?)" } ?? ""
                problems.append(ConfigProblem("\(path).\(key)", "unknown key\(hint)\(Self.line(keyNode))"))
            }
        }
    }

    private mutating func checkList(_ value: Node, path: String) {
        guard case .sequence(let sequence) = value, sequence.allSatisfy({ if case .scalar = $0 { true } else { false } }) else {
            problems.append(ConfigProblem(path, "expected a list of values, such as [a, b]\(Self.line(value))"))
            return
        }
    }

    private static func isNull(_ scalar: Node.Scalar) -> Bool {
        scalar.string.isEmpty || scalar.string == "null" || scalar.string == "~"
    }

    static func isValidID(_ id: String) -> Bool {
        !id.isEmpty
            && id.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
    }

    private static func line(_ node: Node) -> String {
        node.mark.map { " (line \($0.line))" } ?? ""
    }
}

extension ConfigurationLoader {
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
