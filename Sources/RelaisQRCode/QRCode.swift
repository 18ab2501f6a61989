internal import CQRencode

/// A QR code made by libqrencode (never by hand), rendered as SVG: what a desktop or kiosk shows
/// for the phone to scan.
public struct QRCode: Sendable, Equatable {
    /// Modules per side, without the quiet zone.
    public let width: Int
    /// Row-major, `true` for a dark module.
    public let modules: [Bool]

    /// Encodes `text` as bytes, error correction level M (15% of the symbol may be damaged), the
    /// smallest version that fits. Nil when libqrencode refuses it (over about 2,300 bytes at M).
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 2_331 else { return nil }
        // 8-bit mode over the exact bytes: no mode guessing, no case folding.
        let encoded = bytes.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UInt8.self, capacity: bytes.count) { pointer in
                QRcode_encodeData(Int32(bytes.count), pointer, 0, QR_ECLEVEL_M)
            }
        }
        guard let encoded else { return nil }
        defer { QRcode_free(encoded) }
        let width = Int(encoded.pointee.width)
        // Bit 0 of each byte is the module's colour; the other bits describe its role.
        modules = (0..<width * width).map { encoded.pointee.data[$0] & 1 == 1 }
        self.width = width
    }

    /// Whether the module at (`x`, `y`) is dark.
    public func isDark(x: Int, y: Int) -> Bool { modules[y * width + x] }

    /// An SVG image: one path of unit squares, a 4-module quiet zone as the standard asks, scalable
    /// without blur (`shape-rendering: crispEdges`). `size` is the rendered width in pixels.
    public func svg(size: Int = 256, title: String? = nil) -> String {
        let side = width + 8
        var path = ""
        path.reserveCapacity(modules.count * 4)
        for y in 0..<width {
            var x = 0
            while x < width {
                guard isDark(x: x, y: y) else { x += 1; continue }
                // A run of dark modules is one rectangle.
                var run = 1
                while x + run < width, isDark(x: x + run, y: y) { run += 1 }
                path += "M\(x + 4) \(y + 4)h\(run)v1h-\(run)z"
                x += run
            }
        }
        let label = title.map { "<title>\(Self.escape($0))</title>" } ?? ""
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(size)" height="\(size)" viewBox="0 0 \(side) \(side)" shape-rendering="crispEdges" role="img">\
            \(label)<rect width="\(side)" height="\(side)" fill="#fff"/><path fill="#000" d="\(path)"/></svg>
            """
    }

    private static func escape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            default: result.append(character)
            }
        }
        return result
    }
}
