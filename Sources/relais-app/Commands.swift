import ArgumentParser
import Foundation
import RelaisKit

struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "The identity claims (/userinfo).")
    @OptionGroup var options: GlobalOptions
    @Option(help: "The level needed (/userinfo?acr=).") var acr: String?

    func run() async throws {
        try await RelaisAppKit.run {
            emit(String(decoding: try await options.client().userinfo(acr: acr), as: UTF8.self))
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The session: state, acr, expiry, DPoP thumbprint, attestation.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await RelaisAppKit.run {
            let client = try options.client()
            let summary = try await client.status()
            let state = await client.state
            let key = await client.instanceKeyDescription()
            if options.json {
                printJSON([
                    "state": state.code, "acr": summary?.acr, "expires_at": summary.map { ISO8601DateFormatter().string(from: $0.accessTokenExpiresAt) },
                    "dpop_jkt": summary?.dpopThumbprint, "attested": summary?.attested, "session_id": summary?.sessionID, "key": key?.kind.rawValue,
                ])
            } else {
                emit("state: \(state.code)")
                if let summary {
                    emit("acr: \(summary.acr ?? "-")\naccess token until: \(ISO8601DateFormatter().string(from: summary.accessTokenExpiresAt))")
                    emit("DPoP: \(summary.dpopThumbprint ?? "off")\nattested: \(summary.attested ?? "no")")
                }
                if let key { emit("instance key: \(key.kind.rawValue) \(key.thumbprint)") }
            }
        }
    }
}

struct Refresh: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Refresh the tokens now.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await RelaisAppKit.run { report(try await options.client().refresh(), json: options.json) }
    }
}

struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "An authorized request (DPoP when on); prints the status and the body.")
    @OptionGroup var options: GlobalOptions
    @Argument var url: String
    @Option var method: String = "GET"
    @Option(help: "The body (sent as a form when it looks like one, else as JSON).") var data: String?

    func run() async throws {
        try await RelaisAppKit.run {
            guard let target = URL(string: url) else { throw RelaisKitError(.invalidArgument, "not a URL: \(url)") }
            var request = HTTPRequest(method: method, url: target)
            if let data {
                let isJSON = data.hasPrefix("{") || data.hasPrefix("[")
                request.headers.append((name: "Content-Type", value: isJSON ? "application/json" : "application/x-www-form-urlencoded"))
                request.body = Data(data.utf8)
            }
            let response = try await options.client().authorizedRequest(request)
            FileHandle.standardError.write(Data("HTTP \(response.status)\n".utf8))
            emit(String(decoding: response.body, as: UTF8.self))
            guard (200..<400).contains(response.status) else { throw RelaisKitError(.relay("http_\(response.status)"), "the call answered \(response.status)") }
        }
    }
}

struct WebSession: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "web-session", abstract: "A URL that opens the app's web page signed in (60 s, once).")
    @OptionGroup var options: GlobalOptions
    @Option(help: "One of the app's web_targets.") var target: String?

    func run() async throws {
        try await RelaisAppKit.run {
            let link = try await options.client().webSession(target: target)
            if options.json { printJSON(["session_uri": link.url.absoluteString, "target": link.target]) } else { emit(link.url.absoluteString) }
        }
    }
}

struct Approve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show what a device asks (its user code or link), and approve it with --yes.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The user code (XXXX-XXXX) or the verification_uri_complete link.") var codeOrURL: String
    @Flag(help: "Approve without asking.") var yes = false
    @Flag(help: "Deny the request.") var deny = false

    func run() async throws {
        try await RelaisAppKit.run {
            let client = try options.client()
            let context = try await client.inspectDevice(codeOrURL)
            // What Relais knows first (the app's name, when and from where); the device's own label
            // last, marked as its words.
            var asked = "\(context.appName) (\(context.clientID))"
            if let at = context.requestedAt { asked += ", asked at \(ISO8601DateFormatter().string(from: at))" }
            if let address = context.requesterAddress { asked += " from \(address)" }
            asked += ", asks for: \(context.scope) (code \(context.userCode), \(context.expiresIn) s left)"
            if let device = context.device { asked += "; the device calls itself \"\(device)\" (its own words, not verified)" }
            emit(asked)
            var approve = !deny
            if !yes && !deny {
                emit("Approve? [y/N] ", terminator: "")
                approve = readLine()?.lowercased().hasPrefix("y") == true
            }
            let decided = try await client.approveDevice(codeOrURL, approve: approve)
            if options.json {
                printJSON(["client_id": decided.clientID, "device": decided.device, "approved": decided.approved])
            } else {
                emit(decided.approved == true ? "approved" : "denied")
            }
        }
    }
}

struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The person's live sessions.", subcommands: [List.self, End.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list")
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            try await RelaisAppKit.run {
                for session in try await options.client().sessions() {
                    if options.json {
                        printJSON([
                            "id": session.id, "current": session.current, "client_id": session.clientID, "device": session.device, "acr": session.acr, "attested": session.attested,
                        ])
                    } else {
                        emit(
                            "\(session.current ? "*" : " ") \(session.id)  \(session.clientID)  \(session.device ?? "-")  acr \(session.acr ?? "-")  attested \(session.attested ?? "no")"
                        )
                    }
                }
            }
        }
    }

    struct End: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "end", abstract: "End one session by its id.")
        @OptionGroup var options: GlobalOptions
        @Argument var id: String

        func run() async throws {
            try await RelaisAppKit.run { try await options.client().endSession(id: id) }
        }
    }
}

struct SignOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sign-out", abstract: "End the session at Relais and forget the tokens.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await RelaisAppKit.run {
            let confirmed = try await options.client().signOut()
            emit(confirmed ? "signed out" : "signed out here (Relais did not confirm)")
        }
    }
}
