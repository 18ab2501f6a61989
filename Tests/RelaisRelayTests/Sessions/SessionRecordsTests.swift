import Foundation
import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

@Suite(.tags(.fast)) struct SessionRecordsTests {
    /// A login transaction written by an earlier Relais (one flat object) still reads, and a new one
    /// is written the same way, so sign-ins in flight survive an upgrade of the instances.
    @Test func theAppRequestIsStoredAsOneFlatObject() throws {
        let stored =
            #"{"app":{"clientID":"app","redirectURI":"com.example.app:/cb","codeChallenge":"c","state":"s","scopes":["openid"],"providerID":"fc","acr":"eidas1","forceLogin":true},"providerNonce":"n"}"#
        let transaction = try #require(StoredJSON.decode(LoginTransaction.self, Array(stored.utf8)))
        #expect(transaction.app.upstream.providerID == "fc" && transaction.app.upstream.acr == "eidas1" && transaction.app.upstream.forceLogin && transaction.app.state == "s")
        let written = try #require(JSONValue.object(from: StoredJSON.encode(transaction))?["app"]?.objectValue)
        #expect(Set(written.keys) == ["clientID", "redirectURI", "codeChallenge", "state", "scopes", "providerID", "acr", "forceLogin"])
        #expect(StoredJSON.decode(LoginTransaction.self, StoredJSON.encode(transaction))?.app == transaction.app)
    }

    /// Every optional member, as Codable wrote it before Relais wrote these records itself.
    @Test func everyMemberOfATransactionAndACodeComesBack() throws {
        let app =
            #"{"clientID":"app","redirectURI":"com.example.app:\/cb","codeChallenge":"c","state":"s","scopes":["openid","profile"],"nonce":"n1","providerID":"fc","acr":"eidas2","forceLogin":false,"stepUpOf":"old-sid","idpHint":"hint","dpopJKT":"jkt","deviceName":"Pixel de Léa"}"#
        let transaction = try #require(StoredJSON.decode(LoginTransaction.self, Array(#"{"app":\#(app),"providerNonce":"pn","providerCodeVerifier":"v","deviceSID":"dsid"}"#.utf8)))
        #expect(transaction.app.redirectURI == "com.example.app:/cb" && transaction.app.scopes == ["openid", "profile"] && transaction.app.nonce == "n1")
        #expect(transaction.app.upstream.stepUpOf == "old-sid" && transaction.app.upstream.idpHint == "hint" && transaction.app.redemption.dpopJKT == "jkt")
        #expect(transaction.app.deviceName == "Pixel de Léa" && !transaction.app.upstream.forceLogin && transaction.app.upstream.acr == "eidas2")
        #expect(transaction.providerNonce == "pn" && transaction.providerCodeVerifier == "v" && transaction.deviceSID == "dsid")
        let again = try #require(StoredJSON.decode(LoginTransaction.self, StoredJSON.encode(transaction)))
        #expect(again.app == transaction.app && again.providerCodeVerifier == "v" && again.deviceSID == "dsid")

        let code = try #require(
            StoredJSON.decode(RelayCode.self, Array(#"{"app":\#(app),"subject":"sub","acr":"eidas2","sealedIdentity":"x.y","providerSessionID":"psid","replaces":"old"}"#.utf8)))
        #expect(code.app == transaction.app && code.subject == "sub" && code.acr == "eidas2" && code.sealedIdentity == "x.y")
        #expect(code.providerSessionID == "psid" && code.replaces == "old")
        let back = try #require(StoredJSON.decode(RelayCode.self, StoredJSON.encode(code)))
        #expect(back.app == code.app && back.subject == "sub" && back.providerSessionID == "psid" && back.replaces == "old")
    }

    /// A record missing a member it needs, or with one of another type, reads as absent.
    @Test(arguments: [
        #"{"app":{"clientID":"app","redirectURI":"r","codeChallenge":"c","scopes":["openid"],"providerID":"fc"},"providerNonce":"n"}"#,
        #"{"app":{"clientID":"app","redirectURI":"r","codeChallenge":"c","scopes":["openid",3],"providerID":"fc","forceLogin":false},"providerNonce":"n"}"#,
        #"{"app":{"clientID":"app","redirectURI":"r","codeChallenge":"c","scopes":"openid","providerID":"fc","forceLogin":false},"providerNonce":"n"}"#,
        #"{"app":{"clientID":"app","redirectURI":"r","codeChallenge":"c","scopes":[],"providerID":"fc","forceLogin":"no"},"providerNonce":"n"}"#,
        #"{"app":{"clientID":"app","redirectURI":"r","codeChallenge":"c","scopes":[],"providerID":"fc","forceLogin":false}}"#,
        #"{"providerNonce":"n"}"#, "[]", "",
    ])
    func anIncompleteTransactionReadsAsAbsent(_ stored: String) {
        #expect(StoredJSON.decode(LoginTransaction.self, Array(stored.utf8)) == nil)
    }
}
