import Foundation
import RelaisClock
import RelaisHTTPClient
import RelaisJOSE
import RelaisQRCode
import Testing

@testable import RelaisKit

/// Step-up, device approval and device sign-in, against the real relay.
@Suite struct RelaisKitFeatureTests {
    @Test(arguments: ["plain", "secure"])
    func aStepUpOnInsufficientUserAuthentication(app: String) async throws {
        let harness = try await KitHarness.launch()
        let client = harness.client(app)
        let first = try await client.signIn()
        #expect(first.acr == "eidas1")
        do {
            _ = try await client.userinfo(acr: "eidas2")
            Issue.record("an eidas1 session passed an eidas2 requirement")
        } catch let error as RelaisKitError {
            #expect(error.code == .stepUpRequired && error.acr == "eidas2")
        }
        #expect(await client.state == .stepUpRequired(acr: "eidas2", session: first))
        // The same person at FranceConnect+: the session is replaced by an eidas2 one.
        let stepped = try await client.signIn(acr: "eidas2")
        #expect(stepped.acr == "eidas2" && stepped.sessionID != first.sessionID)
        #expect(try await client.userinfo(acr: "eidas2").isEmpty == false)
        #expect(await client.state == .signedIn(stepped))
    }

    @Test func aStepUpByAnotherPersonKeepsTheSession() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let client = harness.client("plain", storage: storage)
        let first = try await client.signIn()
        let stranger = harness.client("plain", storage: storage, identity: "pierre")
        do {
            try await stranger.signIn(acr: "eidas2")
            Issue.record("another person's step-up was accepted")
        } catch let error as RelaisKitError {
            #expect(error.code == .relay("step_up_identity_mismatch"))
        }
        #expect(await stranger.state == .signedIn(first))
        #expect(try await stranger.userinfo().isEmpty == false)
    }

    @Test(arguments: ["plain", "secure"])
    func approvingADeviceShowsItsContextFirst(app: String) async throws {
        let harness = try await KitHarness.launch()
        let client = harness.client(app)
        try await client.signIn()
        let request = try await harness.deviceRequest()
        let typed = request.userCode.lowercased().replacingOccurrences(of: "-", with: "")
        if app == "plain" {
            // Approving opens a session that outlives the token: Relais asks for a DPoP-bound one by
            // default (inspecting too, so the app knows before it asks the person). The plain app
            // hears dpop_required, and stays signed in.
            for call in [{ _ = try await client.inspectDevice(request.complete) }, { _ = try await client.approveDevice(typed) }] as [() async throws -> Void] {
                do {
                    try await call()
                    Issue.record("a bearer token inspected or approved a device")
                } catch let error as RelaisKitError {
                    #expect(error.code == .dpopRequired, "\(error)")
                }
            }
            #expect(try await client.userinfo().isEmpty == false)
            return
        }
        // Scanned: the verification_uri_complete; typed: the code in lower case, without its dash.
        let context = try await client.inspectDevice(request.complete)
        #expect(context.clientID == "desktop" && context.device == "kiosk 12" && context.scope == "openid profile email" && context.approved == nil)
        // What Relais knows comes with it: the app's name (its client_id when none is configured), when and from where.
        #expect(context.appName == "desktop" && context.requestedAt != nil && context.requesterAddress == "127.0.0.1")
        let approved = try await client.approveDevice(typed)
        #expect(approved.approved == true && approved.userCode == request.userCode)
        harness.clock.advance(by: .seconds(10))
        let tokens = try await harness.http.send(
            .form(
                url: harness.issuer + "/token",
                fields: [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", request.deviceCode), ("client_id", "desktop"),
                ]))
        #expect(tokens.status == 200, "\(tokens.bodyText)")
        // A wrong code is Relais' own error, passed through.
        do {
            _ = try await client.inspectDevice("BCDF-GHJK")
            Issue.record("an unknown user code was described")
        } catch let error as RelaisKitError {
            #expect(error.code == .relay("invalid_user_code"))
        }
    }

    @Test func signingInWithTheDeviceGrant() async throws {
        let harness = try await KitHarness.launch()
        let phone = try await harness.otherDevice("secure")
        let desktop = harness.client("desktop")
        let summary = try await desktop.signInWithDevice { code in
            // The person scans the code with the signed-in phone and approves.
            _ = try? await phone.approveDevice(code.verificationURIComplete ?? code.userCode)
        }
        #expect(summary.sessionID != nil)
        #expect(try await desktop.userinfo().isEmpty == false)
    }

    @Test func userCodesFromLinksAndTyping() throws {
        #expect(try RelaisClient.userCode(from: "https://relais.example.fr/device?user_code=WDJB-MJHT") == "WDJB-MJHT")
        #expect(try RelaisClient.userCode(from: " wdjb mjht ") == "WDJB-MJHT")
        #expect(try RelaisClient.userCode(from: "wdjbmjht") == "WDJB-MJHT")
        #expect(throws: RelaisKitError.self) { try RelaisClient.userCode(from: "WDJB-MJH") }
        #expect(throws: RelaisKitError.self) { try RelaisClient.userCode(from: "https://relais.example.fr/device") }
    }
}

/// The device's QR code as RelaisKit reads it from Relais is libqrencode's, module for module.
@Suite struct RelaisKitQRCodeTests {
    @Test func theQRCodeOfAUserCodeIsRelaisOwn() async throws {
        let harness = try await KitHarness.launch()
        let request = try await harness.deviceRequest()
        let matrix = try await harness.client("desktop").deviceQRCode(userCode: request.userCode)
        let expected = try #require(QRCode(request.complete))
        #expect(matrix.width == expected.width && matrix.modules == expected.modules)
        let lines = matrix.terminalText.split(separator: "\n")
        #expect(lines.count == (expected.width + 5) / 2 && lines.allSatisfy { $0.count == expected.width + 4 })
        // The top-left finder pattern: dark on its outer ring, light inside it, drawn inverted.
        #expect(matrix.isDark(x: 0, y: 0) && matrix.isDark(x: 6, y: 0) && !matrix.isDark(x: 1, y: 1) && matrix.isDark(x: 3, y: 3))
        #expect(QRMatrix(svg: "<svg/>") == nil)
    }
}
