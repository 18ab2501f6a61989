import RelaisQRCode
import RelaisTestSupport
import Testing

/// libqrencode through the bridge: sizes by content, the finder patterns in place, and the SVG
/// drawing exactly the dark modules. (The e2e suite reads the served image back with zxing-cpp.)
@Suite(.tags(.fast)) struct QRCodeTests {
    @Test func theSymbolGrowsWithItsContent() throws {
        let short = try #require(QRCode("BCDF-GHJK"))
        #expect(short.width == 21)  // version 1
        let url = try #require(QRCode("https://relais.example.fr/device?user_code=BCDF-GHJK"))
        #expect(url.width > 21 && (url.width - 17) % 4 == 0)
        let long = try #require(QRCode(String(repeating: "x", count: 2000)))
        #expect(long.width > url.width)
        #expect(QRCode("") == nil)
        #expect(QRCode(String(repeating: "x", count: 3000)) == nil)
        // The same text, the same symbol.
        #expect(QRCode("BCDF-GHJK") == short)
    }

    /// The three 7×7 finder patterns: a dark ring, a light ring, a dark 3×3 centre.
    @Test func theFinderPatternsAreInTheirCorners() throws {
        let code = try #require(QRCode("https://relais.example.fr/device?user_code=BCDF-GHJK"))
        for (left, top) in [(0, 0), (code.width - 7, 0), (0, code.width - 7)] {
            for y in 0..<7 {
                for x in 0..<7 {
                    let ring = max(abs(x - 3), abs(y - 3))
                    #expect(code.isDark(x: left + x, y: top + y) == (ring != 2), "(\(left + x), \(top + y))")
                }
            }
        }
    }

    @Test func theSVGDrawsEachDarkModuleOnce() throws {
        let code = try #require(QRCode("BCDF-GHJK"))
        let svg = code.svg(size: 200, title: "Code <BCDF>")
        #expect(svg.contains(#"viewBox="0 0 29 29""#))  // 21 modules and a 4-module quiet zone each side
        #expect(svg.contains("<title>Code &lt;BCDF&gt;</title>"))
        // Sum the runs: each "h<n>" is n dark modules.
        let runs = svg.matches(of: /h(\d+)v1/).map { Int($0.1)! }
        #expect(runs.reduce(0, +) == code.modules.filter { $0 }.count)
    }
}
