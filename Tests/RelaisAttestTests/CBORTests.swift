import Foundation
import RelaisAttest
import RelaisTestSupport
import Testing

/// The decoder reads what App Attest sends and refuses the rest, in time linear in the input.
@Suite(.tags(.fast)) struct CBORTests {
    @Test func readsTheItemsAppAttestUses() throws {
        let value: CBORValue = CBORWriter.map([
            ("n", .unsigned(500)), ("m", .negative(6)), ("b", .bytes([1, 2, 3])), ("t", .text("é")), ("a", .array([.bool(true), .null, .undefined])),
        ])
        #expect(try CBORDecoder.decode(CBORWriter.encode(value)) == value)
        #expect(value[text: "m"]?.intValue == -7)
        #expect(try CBORDecoder.decode([0x1b, 0, 0, 0, 1, 0, 0, 0, 0]) == .unsigned(1 << 32))
    }

    @Test(
        arguments: [
            ([0x5f, 0x41, 0x00, 0xff], "indefinite"),  // indefinite-length byte string
            ([0xc2, 0x41, 0x01], "tags"),  // bignum tag
            ([0xf9, 0x3c, 0x00], "floating"),  // half float
            ([0x01, 0x02], "after the item"),  // trailing byte
            ([0x5a, 0xff, 0xff, 0xff, 0xff, 0x00], "exceeds"),  // a 4 GiB byte string in 6 bytes
            ([0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], "exceeds"),  // 2^64 - 1 array items
            ([0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02], "twice"),  // duplicate key
            ([0xa1, 0x41, 0x00, 0x01], "map keys"),  // byte-string key
            ([0x62, 0xc3, 0x28], "UTF-8"),  // invalid UTF-8
            ([0x1c], "reserved"),
            ([0x58], "end of input"),
        ] as [([UInt8], String)])
    func refuses(_ bytes: [UInt8], _ reason: String) {
        #expect {
            _ = try CBORDecoder.decode(bytes)
        } throws: { error in
            (error as? CBORError)?.reason.contains(reason) ?? false
        }
    }

    @Test func nestingIsBounded() {
        let deep = [UInt8](repeating: 0x81, count: 10_000) + [0x00]
        #expect(throws: CBORError.self) { _ = try CBORDecoder.decode(deep) }
        let allowed = [UInt8](repeating: 0x81, count: CBORDecoder.maxDepth - 1) + [0x00]
        #expect(throws: Never.self) { _ = try CBORDecoder.decode(allowed) }
    }

    /// The worst input for a naive decoder: a map that declares a million entries in a few bytes
    /// and an array of a million one-byte items. The first is refused at its head, the second read
    /// in one pass.
    @Test func declaredLengthsNeverOutrunTheInput() throws {
        #expect(throws: CBORError.self) { _ = try CBORDecoder.decode([0xba, 0x00, 0x0f, 0x42, 0x40, 0x00]) }
        let big = [0x9a, 0x00, 0x0f, 0x42, 0x40] + [UInt8](repeating: 0x00, count: 1_000_000)
        #expect(try CBORDecoder.decode(big).arrayValue?.count == 1_000_000)
    }

    /// Fuzzing with a fixed seed: every mutation of Apple's sample attestation and random inputs
    /// decode or throw, never trap.
    @Test func mutationsNeverCrash() throws {
        var generator = SplitMix64(seed: 0x5eed)
        let sample = try AppAttestTests.appleSample()
        var decoded = 0
        for round in 0..<3000 {
            var bytes = sample
            for _ in 0..<(1 + round % 8) {
                let index = Int(generator.next() % UInt64(bytes.count))
                switch generator.next() % 3 {
                case 0: bytes[index] = UInt8(truncatingIfNeeded: generator.next())
                case 1: bytes.remove(at: index)
                default: bytes.insert(UInt8(truncatingIfNeeded: generator.next()), at: index)
                }
            }
            if (try? CBORDecoder.decode(bytes)) != nil { decoded += 1 }
        }
        for _ in 0..<3000 {
            let bytes = (0..<Int(generator.next() % 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            _ = try? CBORDecoder.decode(bytes)
        }
        #expect(decoded < 3000, "mutations were checked, not all accepted")
    }
}
