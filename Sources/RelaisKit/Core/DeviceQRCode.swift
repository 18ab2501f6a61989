import Foundation

/// A QR code's modules, as Relais draws it for a device (`GET /device/qr.svg`, made by
/// libqrencode on the server): a device app shows it without a QR library of its own.
public struct QRMatrix: Sendable, Equatable {
    /// Modules per side, without the quiet zone.
    public let width: Int
    /// Row-major, `true` for a dark module.
    public let modules: [Bool]

    /// Whether the module at (`x`, `y`) is dark.
    public func isDark(x: Int, y: Int) -> Bool { x >= 0 && y >= 0 && x < width && y < width && modules[y * width + x] }

    /// Reads Relais' SVG: a `viewBox` of the symbol plus a 4-module quiet zone, and one path of
    /// `M{x} {y}h{run}v1h-{run}z` rectangles, one per run of dark modules.
    public init?(svg: String) {
        guard let box = svg.range(of: "viewBox=\"0 0 ").map({ svg[$0.upperBound...] }),
            let side = Int(box.prefix { $0.isNumber }), side > 8,
            let path = svg.range(of: " d=\"").map({ svg[$0.upperBound...].prefix { $0 != "\"" } })
        else { return nil }
        let width = side - 8
        var modules = [Bool](repeating: false, count: width * width)
        for rectangle in path.split(separator: "z") {
            let numbers = rectangle.split(whereSeparator: { !$0.isNumber && $0 != "-" }).compactMap { Int($0) }
            guard rectangle.hasPrefix("M"), numbers.count >= 3 else { return nil }
            let (x, y, run) = (numbers[0] - 4, numbers[1] - 4, numbers[2])
            guard y >= 0, y < width, x >= 0, run > 0, x + run <= width else { return nil }
            for column in x..<(x + run) { modules[y * width + column] = true }
        }
        self.width = width
        self.modules = modules
    }

    /// The code for a terminal, two module rows per line in half blocks, light modules drawn
    /// (light text on a dark terminal), with a 2-module quiet zone.
    public var terminalText: String {
        var lines: [String] = []
        let range = -2..<(width + 2)
        for y in stride(from: -2, to: width + 2, by: 2) {
            var line = ""
            for x in range {
                switch (isDark(x: x, y: y), isDark(x: x, y: y + 1) || y + 1 >= width + 2) {
                case (false, false): line += "█"
                case (false, true): line += "▀"
                case (true, false): line += "▄"
                case (true, true): line += " "
                }
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}

extension RelaisClient {
    /// The QR code Relais makes for a device's user code (`GET /device/qr.svg`): it encodes the
    /// `verification_uri_complete`, for a signed-in phone to scan.
    public func deviceQRCode(userCode: String) async throws -> QRMatrix {
        let endpoints = try await endpoints()
        var components = URLComponents(url: endpoints.path("/device/qr.svg"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "user_code", value: userCode)]
        let response = try await platform.transport.send(HTTPRequest(url: components.url!))
        guard response.status == 200, let matrix = QRMatrix(svg: String(decoding: response.body, as: UTF8.self)) else {
            throw RelayFailure(response)?.kitError(status: response.status) ?? RelaisKitError(.invalidResponse, "/device/qr.svg answered \(response.status)")
        }
        return matrix
    }
}
