import Foundation
import RelaisJOSE
@testable import RelaisRelay
import RelaisStore
import Testing

@Suite struct SessionRecordsTests {
    /// A login transaction written by an earlier Relais (one flat object) still reads, and a new one
    /// is written the same way, so sign-ins in flight survive an upgrade of the instances.
    @Test func theAppRequestIsStoredAsOneFlatObject() throws {
        let stored = #"{"app":{"clientID":"app","redirectURI":"com.example.app:/cb","codeChallenge":"c","state":"s","scopes":["openid"],"providerID":"fc","acr":"eidas1","forceLogin":true},"providerNonce":"n"}"#
        let transaction = try #require(StoredJSON.decode(LoginTransaction.self, Array(stored.utf8)))
        #expect(transaction.app.providerID == "fc" && transaction.app.acr == "eidas1" && transaction.app.forceLogin && transaction.app.state == "s")
        let written = try #require(JSONValue.object(from: StoredJSON.encode(transaction))?["app"]?.objectValue)
        #expect(Set(written.keys) == ["clientID", "redirectURI", "codeChallenge", "state", "scopes", "providerID", "acr", "forceLogin"])
        #expect(StoredJSON.decode(LoginTransaction.self, StoredJSON.encode(transaction))?.app == transaction.app)
    }
}
