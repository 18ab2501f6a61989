import ArgumentParser
import Foundation
import RelaisConfig

#if canImport(Glibc)
import Glibc
#endif

/// `relais reload`: asks a running `relais serve` to read its configuration again (SIGHUP). With
/// `--config`, the file is checked first and nothing is sent if it would be refused, so a typo
/// is reported here rather than only in the server's log.
struct ReloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Make a running `relais serve` reload its configuration (SIGHUP); a configuration it would refuse is not applied."
    )

    @Option(help: "The process id of `relais serve`.")
    var pid: Int32?

    @Option(help: "The file `relais serve --pid-file` wrote.")
    var pidFile: String?

    @Option(name: .shortAndLong, help: "Check this configuration file (with the current RELAIS_* environment) before signalling; exit 2 without signalling when it has problems.")
    var config: String?

    func validate() throws {
        guard (pid == nil) != (pidFile == nil) else { throw ValidationError("give either --pid or --pid-file") }
    }

    func run() async throws {
        let target: Int32
        if let pid {
            target = pid
        } else if let pidFile {
            guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8), let read = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), read > 0 else {
                printError("\(pidFile) does not hold a process id")
                throw ExitCode(2)
            }
            target = read
        } else {
            throw ExitCode(2)
        }
        if let config {
            do {
                _ = try await ConfigurationLoader.load(filePath: config, environment: currentEnvironment())
            } catch {
                printError(error.description)
                printError("not reloaded: the running configuration stays")
                throw ExitCode(2)
            }
        }
        guard target > 0, kill(target, SIGHUP) == 0 else {
            printError("cannot signal process \(target): \(String(cString: strerror(errno)))")
            throw ExitCode(1)
        }
        print("reload requested from process \(target)")
    }
}
