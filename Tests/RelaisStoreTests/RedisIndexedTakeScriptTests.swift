import RelaisTestSupport
import Testing

@testable import RelaisStore

/// Reading the indexed take's reply: every shape the script can answer, and anything else refused
/// as a failed command rather than read as a take (the store tests run the script itself).
@Suite(.tags(.fast)) struct RedisIndexedTakeScriptTests {
    let memberships = [SetMembership("person:a", member: "s1", ttl: nil), SetMembership("idp:b", member: "s1", ttl: nil)]

    @Test func theScriptsAnswersAreRead() throws {
        #expect(try RedisIndexedTakeScript.outcome(.null, memberships) == nil)
        let taken = RedisReply.array([.string(Array("record".utf8)), .integer(3), .integer(1), .null, .null])
        #expect(try RedisIndexedTakeScript.outcome(taken, memberships) == IndexedTake(value: Array("record".utf8), setSizes: [3, 1]))
        // A set over its listing threshold comes with its members.
        let listed = RedisReply.array([.string(Array("record".utf8)), .integer(3), .integer(1), .array(["s1", "s2", "s3"].map { .string(Array($0.utf8)) }), .null])
        #expect(
            try RedisIndexedTakeScript.outcome(listed, memberships) == IndexedTake(value: Array("record".utf8), setSizes: [3, 1], listed: [["s1", "s2", "s3"], nil]))
        #expect(throws: StoreError.wrongType(key: "idp:b")) { try RedisIndexedTakeScript.outcome(.integer(3), memberships) }
    }

    @Test(arguments: [
        RedisReply.status("OK"),
        .integer(1),  // a position that is not a set's
        .integer(4),
        .array([.string(Array("record".utf8)), .integer(3), .null]),  // a size missing
        .array([.string(Array("record".utf8)), .integer(3), .integer(1)]),  // the listings missing
        .array([.string(Array("record".utf8)), .integer(3), .integer(1), .integer(2), .null]),  // a listing neither members nor null
        .array([.integer(3), .integer(3), .integer(1), .null, .null]),  // no value first
        .array([.string(Array("record".utf8)), .string(Array("3".utf8)), .integer(1), .null, .null]),
    ])
    func anythingElseIsAFailedCommand(reply: RedisReply) {
        #expect(throws: StoreError.commandFailed(reason: "unexpected reply to an indexed take")) {
            try RedisIndexedTakeScript.outcome(reply, memberships)
        }
    }
}
