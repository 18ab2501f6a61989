/// One thing wrong with a configuration, named by its key path (`store.redis.url`) or its
/// environment variable (`RELAIS_STORE_REDIS_URL`).
public struct ConfigProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var keyPath: String
    public var message: String

    public init(_ keyPath: String, _ message: String) {
        self.keyPath = keyPath
        self.message = message
    }

    public var description: String { "\(keyPath): \(message)" }
}

/// Every problem found, reported at once: an operator fixes a file in one pass, not one error per restart.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var problems: [ConfigProblem]

    public var description: String {
        "invalid configuration (\(problems.count) problem\(problems.count == 1 ? "" : "s")):\n"
            + problems.map { "  - \($0)" }.joined(separator: "\n")
    }
}
