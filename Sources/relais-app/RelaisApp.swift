import ArgumentParser
import Foundation
import RelaisKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `relais-app`: a terminal app on RelaisKit, to see the library work against a Relais.
@main
struct RelaisApp: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relais-app",
        abstract: "A terminal app built on RelaisKit: sign in through Relais, call APIs with DPoP, approve devices.",
        subcommands: [SignIn.self, WhoAmI.self, Status.self, Refresh.self, Call.self, WebSession.self, Approve.self, Sessions.self, SignOut.self]
    )

    /// The global options may come before the command (`relais-app --relay URL --store DIR sign-in`):
    /// they are moved after it, where each command's option group reads them.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            var command = try parseAsRoot(reordered(arguments))
            if var asynchronous = command as? any AsyncParsableCommand { try await asynchronous.run() } else { try command.run() }
        } catch {
            exit(withError: error)
        }
    }

    static let globalOptions: Set<String> = ["--relay", "--client-id", "--store", "--attest", "--scope"]
    static let globalFlags: Set<String> = ["--dpop", "--json"]

    static func reordered(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = String(argument.split(separator: "=", maxSplits: 1).first ?? "")
            if globalFlags.contains(argument) || (globalOptions.contains(name) && argument.contains("=")) {
                leading.append(argument)
                index += 1
            } else if globalOptions.contains(argument), index + 1 < arguments.count {
                leading += [argument, arguments[index + 1]]
                index += 2
            } else {
                break
            }
        }
        return Array(arguments[index...]) + leading
    }
}

struct GlobalOptions: ParsableArguments {
    @Option(help: "Relais' issuer URL.") var relay: String
    @Option(name: .customLong("client-id"), help: "The app's client_id at Relais.") var clientID: String = "relais-app"
    @Option(help: "The directory that keeps the tokens and the instance key (mode 0700, files 0600).") var store: String
    @Flag(help: "Bind the tokens to the instance key (DPoP, RFC 9449).") var dpop = false
    @Option(help: "Attest the instance: dev (Relais' development attester).") var attest: String?
    @Option(help: "The scopes to ask for.") var scope: String = "openid profile birth email"
    @Flag(help: "Print JSON.") var json = false

    func client(open: @escaping @Sendable (URL) async throws -> Void = { _ in }) throws -> RelaisClient {
        let attestation: AttestationMode?
        switch attest {
        case nil: attestation = nil
        case "dev": attestation = .development
        default: throw ValidationError("--attest takes dev")
        }
        let configuration = RelaisConfiguration(
            issuer: relay, clientID: clientID, scopes: scope.split(separator: " ").map(String.init), dpop: dpop || attest != nil,
            attestation: attestation, deviceName: "relais-app on " + ProcessInfo.processInfo.hostName
        )
        let platform = RelaisPlatform(
            storage: try FileStorage(directory: URL(fileURLWithPath: store)), web: LoopbackWebAuthenticator(path: "/cb", open: open)
        )
        return RelaisClient(configuration: configuration, platform: platform)
    }
}

/// Runs a command: prints the error code on standard error and exits 1 on failure.
func runReporting(_ body: () async throws -> Void) async throws {
    do { try await body() } catch let error as RelaisKitError {
        FileHandle.standardError.write(Data("error: \(error.code.rawValue): \(error.message)\n".utf8))
        if let acr = error.acr { FileHandle.standardError.write(Data("acr_values: \(acr)\n".utf8)) }
        throw ExitCode(1)
    }
}

func printJSON(_ object: [String: Any?]) {
    let cleaned = object.compactMapValues { $0 }
    if let data = try? JSONSerialization.data(withJSONObject: cleaned, options: [.sortedKeys]) { emit(String(decoding: data, as: UTF8.self)) }
}

/// Standard output without stdio's buffer: the authorization URL must reach a pipe at once.
func emit(_ text: String, terminator: String = "\n") { FileHandle.standardOutput.write(Data((text + terminator).utf8)) }

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sign-in", abstract: "Sign in through the browser (loopback redirect), or with --device on another device.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "The authentication level to ask for (acr_values), such as eidas2.") var acr: String?
    @Option(help: "Relais' provider id.") var provider: String?
    @Flag(name: .customLong("no-browser"), help: "Only print the URL.") var noBrowser = false
    @Flag(help: "Sign in by the device grant (RFC 8628): approve the code from a signed-in app.") var device = false

    func run() async throws {
        try await RelaisAppKit.run {
            let noBrowser = noBrowser
            let client = try options.client { url in
                emit(url.absoluteString)
                if !noBrowser { openBrowser(url) }
            }
            let summary: SessionSummary
            if device {
                summary = try await client.signInWithDevice { code in
                    emit("Approve this device with the code \(code.userCode) at \(code.verificationURI)")
                    if let complete = code.verificationURIComplete { emit(complete) }
                    // Relais' own QR code (libqrencode on the server), drawn here in half blocks.
                    if let qr = try? await client.deviceQRCode(userCode: code.userCode) { emit(qr.terminalText) }
                }
            } else {
                summary = try await client.signIn(acr: acr, provider: provider)
            }
            report(summary, json: options.json)
        }
    }
}

func openBrowser(_ url: URL) {
    let process = Process()
    #if os(macOS)
    process.executableURL = URL(fileURLWithPath: "/usr/bin/open")
    #else
    process.executableURL = URL(fileURLWithPath: "/usr/bin/xdg-open")
    #endif
    process.arguments = [url.absoluteString]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try? process.run()
}

func report(_ summary: SessionSummary, json: Bool) {
    let expires = ISO8601DateFormatter().string(from: summary.accessTokenExpiresAt)
    if json {
        printJSON([
            "state": "signed_in", "acr": summary.acr, "expires_at": expires, "dpop_jkt": summary.dpopThumbprint, "attested": summary.attested, "session_id": summary.sessionID,
        ])
    } else {
        emit("signed in: acr \(summary.acr ?? "-"), access token until \(expires), DPoP \(summary.dpopThumbprint ?? "off"), attested \(summary.attested ?? "no")")
    }
}

/// Namespaced so that commands' `run()` can call the top-level runner.
enum RelaisAppKit {
    static func run(_ body: () async throws -> Void) async throws { try await runReporting(body) }
}
