import RelaisConfig
import RelaisServer
import RelaisTestSupport
import Testing

@Suite(.tags(.fast)) struct ClientAddressTests {
    let proxies = ["10.0.0.0/8", "127.0.0.1", "fd00::/8"].compactMap(IPNetwork.init)

    @Test func networksMatchByPrefix() throws {
        let network = try #require(IPNetwork("192.168.4.0/22"))
        #expect(network.contains("192.168.7.255") && !network.contains("192.168.8.0"))
        #expect(try #require(IPNetwork("::1")).contains("::1"))
        #expect(try #require(IPNetwork("0.0.0.0/0")).contains("8.8.8.8"))
        #expect(try #require(IPNetwork("127.0.0.1")).contains("::ffff:127.0.0.1"))  // IPv4-mapped
        #expect(try #require(IPNetwork("10.0.0.0/8")).contains("::ffff:10.200.0.1") && !IPNetwork("fd00::/8")!.contains("10.0.0.1"))
        #expect(IPNetwork("10.0.0.0/33") == nil && IPNetwork("not-an-ip") == nil && IPNetwork("::1/129") == nil)
    }

    @Test func forwardedForIsBelievedOnlyFromTrustedProxies() {
        #expect(ClientAddress.resolve(peer: "198.51.100.9", forwardedFor: "203.0.113.7", trustedProxies: proxies) == "198.51.100.9")
        #expect(ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: "203.0.113.7", trustedProxies: proxies) == "203.0.113.7")
        // The client can write anything on the left; the rightmost untrusted hop is what the proxy saw.
        #expect(ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: "1.2.3.4, 203.0.113.7, 10.9.9.9", trustedProxies: proxies) == "203.0.113.7")
        #expect(ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: "garbage", trustedProxies: proxies) == "10.1.2.3")
        #expect(ClientAddress.resolve(peer: "10.1.2.3", forwardedFor: nil, trustedProxies: proxies) == "10.1.2.3")
        #expect(ClientAddress.resolve(peer: "fd00::5", forwardedFor: "2001:db8::1", trustedProxies: proxies) == "2001:db8::1")
        #expect(ClientAddress.resolve(peer: nil, forwardedFor: "203.0.113.7", trustedProxies: proxies) == "unknown")
    }
}
