import RelaisCrypto
import RelaisTestSupport
import Testing

@Suite(.tags(.fast)) struct RelaisCryptoTests {
    @Test func sha256MatchesFIPSVectors() {
        #expect(SHA256.hexHash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hexHash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    /// Contiguous input (arrays, native strings, substrings) is hashed in place, anything else
    /// through a copy: the digest is the same whichever way the bytes come.
    @Test func sha256IsTheSameForEveryFormOfTheSameBytes() {
        let text = "prefix.abc"
        let expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        let part = text.split(separator: ".")[1]
        #expect(Hex.encode(SHA256.hash(part)) == expected)
        #expect(Hex.encode(SHA256.hash(Array("abc".utf8))) == expected)
        #expect(Hex.encode(SHA256.hash(Array("abc".utf8)[...])) == expected)
        #expect(Hex.encode(SHA256.hash("abc".utf8.lazy.map { $0 })) == expected)
        #expect(Hex.encode(SHA256.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func byteScansFindCountAndBound() {
        let text = Array("a.b\u{1}.é".utf8)
        text.withUnsafeBufferPointer { bytes in
            #expect(ByteScan.firstIndex(of: UInt8(ascii: "."), in: bytes) == 1)
            #expect(ByteScan.firstIndex(of: UInt8(ascii: "z"), in: bytes) == nil)
            #expect(ByteScan.count(of: UInt8(ascii: "."), in: bytes) == 2)
            #expect(ByteScan.extremes(of: bytes) == (lowest: 0x01, highest: 0xC3))
            #expect(ByteScan.extremes(of: UnsafeBufferPointer(rebasing: bytes[0..<0])) == (lowest: 0xFF, highest: 0))
        }
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        for byte in UInt8.min...UInt8.max { #expect(ByteScan.isUnreserved(byte) == unreserved.contains(byte), "\(byte)") }
    }

    @Test func theDotsOfACompactSerializationAreCounted() {
        #expect(CompactSerialization.dots(in: "") == 0)
        #expect(CompactSerialization.dots(in: "a.b.c") == 2)
        #expect(CompactSerialization.dots(in: "h..i.c.t") == 4)
        #expect(CompactSerialization.dots(in: "....") == 4)
        #expect(CompactSerialization.dots(in: "é.😀.") == 2)
        #expect(CompactSerialization.dots(in: String(repeating: "ab.", count: 700)) == 700)
    }

    @Test func base64URLRoundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = SecureRandom.bytes(length)
            let encoded = Base64URL.encode(bytes)
            #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
            #expect(Base64URL.decode(encoded) == bytes)
        }
    }

    @Test func base64URLMatchesRFC4648Vectors() {
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode(Array("fooba".utf8)) == "Zm9vYmE")
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
    }

    /// Contiguous input is encoded in place, anything else through a copy: the same text.
    @Test func base64URLEncodesSlicesAndNonContiguousInputAlike() {
        let bytes = SecureRandom.bytes(40)
        for range in [0..<40, 1..<40, 3..<38, 5..<5] {
            let expected = Base64URL.encode(Array(bytes[range]))
            #expect(Base64URL.encode(bytes[range]) == expected)
            #expect(Base64URL.encode(bytes[range].lazy.map { $0 }) == expected)
        }
        #expect(Base64URL.encode("fooba".utf8) == "Zm9vYmE")
    }

    @Test func base64URLRejectsMalformedInput() {
        #expect(Base64URL.decode("Zm9v=") == nil)  // padding
        #expect(Base64URL.decode("Zm+v") == nil)  // standard alphabet
        #expect(Base64URL.decode("Z") == nil)  // impossible length
        #expect(Base64URL.decode("Zh") == nil)  // non-zero leftover bits ("Zg" is canonical)
        #expect(Base64URL.decode("Zg") == [0x66])
    }

    @Test func constantTimeEquality() {
        #expect(ConstantTime.equals("secret", "secret"))
        #expect(!ConstantTime.equals("secret", "secreT"))
        #expect(!ConstantTime.equals("secret", "secrets"))
        #expect(ConstantTime.equals([UInt8](), []))
    }

    @Test func randomTokensAreDistinctAndSized() {
        let tokens = Set((0..<1000).map { _ in SecureRandom.token(bits: 128) })
        #expect(tokens.count == 1000)
        #expect(tokens.allSatisfy { Base64URL.decode($0)?.count == 16 })
    }

    /// Segments are cut at every dot, empty ones kept, as `split` with empty subsequences does.
    @Test func compactSegmentsAreCutAtEveryDot() {
        for text in ["", ".", "a", "a.b", "a..b", ".a.", "eyJ.eyJ.sig", "h.k.iv.ct.tag", String(repeating: "x.", count: 300)] {
            let bytes = Array(text.utf8)
            let expected = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map(Array.init)
            #expect(CompactSerialization.segments(of: bytes).map { Array(bytes[$0]) } == expected, "\(text.prefix(20))")
        }
    }

    /// Every length comes whole from the kernel, past getrandom's 256 bytes in one call too, and
    /// looks random: a buffer left zeroed or half filled fails the count of its one bits.
    @Test func randomBytesFillEveryLength() {
        #expect(SecureRandom.bytes(0).isEmpty)
        for length in [1, 12, 255, 256, 257, 4096] {
            let first = SecureRandom.bytes(length)
            #expect(first.count == length)
            if length >= 12 { #expect(first != SecureRandom.bytes(length), "\(length)") }
        }
        let large = SecureRandom.bytes(65_536)
        let ones = large.reduce(0) { $0 + $1.nonzeroBitCount }
        // 524,288 bits: a fair source is within 8 standard deviations (362 bits each) of half.
        #expect(abs(ones - 262_144) < 2_900, "\(ones) one bits of 524,288")
        let lastQuarter = large[49_152...].reduce(0) { $0 + $1.nonzeroBitCount }
        #expect(abs(lastQuarter - 65_536) < 1_500, "\(lastQuarter) one bits in the last quarter")
    }

    @Test func standardBase64IsPaddedForBasicCredentials() {
        #expect(Base64.encode(Array("Aladdin:open sesame".utf8)) == "QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
        #expect(Base64.encode([UInt8]()) == "")
        #expect(Base64.decode("QWxhZGRpbjpvcGVuIHNlc2FtZQ==") == Array("Aladdin:open sesame".utf8))
        #expect(Base64.decode("+/8=") == [0xFB, 0xFF] && Base64.decode("-_8") == [0xFB, 0xFF])
        #expect(Base64.decode("not base64!") == nil)
    }
}

@Suite(.tags(.fast)) struct HMACTests {
    /// RFC 4231 test case 2.
    @Test func sha256MatchesRFC4231() {
        #expect(
            Hex.encode(HMAC.sha256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    /// RFC 4231 test case 6 (a key longer than the block, hashed first), an empty key and empty
    /// data, and calls in parallel: each call copies one shared context, which must stay unkeyed.
    @Test func longAndEmptyKeysAndConcurrentCalls() async {
        let long = HMAC.sha256(key: [UInt8](repeating: 0xAA, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
        #expect(Hex.encode(long) == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        #expect(Hex.encode(HMAC.sha256(key: [], [])) == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let key = Array("key \(index)".utf8)
                    return (0..<50).allSatisfy { _ in HMAC.sha256(key: key, Array("data".utf8)) == HMAC.sha256(key: key, Array("data".utf8)) }
                        && HMAC.sha256(key: key, Array("data".utf8)) != HMAC.sha256(key: Array("other".utf8), Array("data".utf8))
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0 })
    }
}

@Suite(.tags(.fast)) struct ByteArrayTests {
    /// Arrays hold exactly the bytes written, and only as many as the body says it wrote, at
    /// every length either side of 1 KB (a temporary buffer on the stack up to it, the standard
    /// library's allocation beyond).
    @Test func arraysHoldWhatTheirBodyWrote() {
        for capacity in [0, 1, 2, 31, 32, 33, 255, 256, 1023, 1024, 1025, 4096, 70_000] {
            let full = [UInt8](uninitializedBytes: capacity) { buffer, written in
                for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &* 31 &+ 7) }
                written = capacity
            }
            #expect(full == (0..<capacity).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            let part = [UInt8](uninitializedBytes: capacity) { buffer, written in
                for index in buffer.indices { buffer[index] = 0xA5 }
                written = capacity / 3
            }
            #expect(part == [UInt8](repeating: 0xA5, count: capacity / 3))
            #expect([UInt8](zeroedBytes: capacity) == [UInt8](repeating: 0, count: capacity))
        }
    }
}
