import Foundation
import HTTPTypes
import RelaisHTTPClient
import RelaisJOSE
import RelaisOIDC
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

@Suite(.tags(.fast)) struct ErrorCatalogueTests {
    /// docs/errors.md is `relais errors --markdown`: regenerate it when this fails.
    @Test func theCommittedCatalogueIsTheGeneratedOne() throws {
        let path = RelaisProcess.packageRoot.appendingPathComponent("docs/errors.md").path
        let committed = try String(contentsOfFile: path, encoding: .utf8)
        #expect(committed == ErrorCatalogue.markdown(), "docs/errors.md is stale: run `.build/debug/relais errors --markdown > docs/errors.md`")
    }

    @Test func everyRelayCodeHasItsStatusAndSentences() {
        let codes = RelayError.Code.allCases
        #expect(Set(codes.map(\.rawValue)).count == codes.count)
        for code in codes {
            #expect(!code.meaning.isEmpty && !code.advice.isEmpty && !code.surfaces.isEmpty, "\(code)")
            #expect(code.meaning.hasSuffix(".") && code.advice.hasSuffix("."), "\(code)")
        }
        #expect(RelayError.Code.missingToken.wireCode == "invalid_token")
        #expect(RelayError.Code.invalidClient.status == .unauthorized && RelayError.Code.insufficientScope.status == .forbidden)
    }

    /// The bearer authenticator tells an expired token (never worth a key check) and an unknown
    /// key (worth one) by a marker, whatever the words say.
    @Test func aRefusedAccessTokenCarriesItsFault() {
        let expired = BearerAuthenticator.refusal(.claimRejected(check: .expiration, reason: "expired 5 s ago"))
        #expect(expired.tokenFault == .expired && expired.description == "the access token has expired")
        #expect(BearerAuthenticator.refusal(.noMatchingKey(reason: "kid")).tokenFault == .unknownKey)
        let forged = BearerAuthenticator.refusal(.invalidSignature)
        #expect(forged.tokenFault == nil && forged.description == "the access token is not valid (jose_invalid_signature)")
    }

    /// Every case of the catalogued error types appears in its catalogue, once.
    @Test func everyCodeOfTheOtherModulesIsCatalogued() {
        func check(_ catalogue: [String], _ codes: [String]) {
            #expect(Set(catalogue).count == catalogue.count, "a code is listed twice")
            for code in codes { #expect(catalogue.contains(code), "\(code) is not catalogued") }
        }
        check(
            StoreError.catalogue.map(\.code),
            [
                StoreError.storeUnavailable(reason: ""), .wrongType(key: ""), .commandFailed(reason: ""), .shutdown,
            ].map(\.code))
        check(
            HTTPClientError.catalogue.map(\.code),
            [
                HTTPClientError.timeout, .connectionRefused(host: ""), .dnsFailure(host: ""), .tls(reason: ""), .responseTooLarge(limit: 1),
                .tooManyRedirects, .invalidURL, .incompleteResponse(host: ""), .shutdown, .transport(curlCode: 0, reason: ""),
            ].map(\.code))
        check(
            UpstreamError.catalogue.map(\.code),
            [
                UpstreamError.unavailable(""), .invalidResponse(""), .rejected(error: "", description: ""), .idTokenRejected(.invalidSignature),
                .userinfoRejected(""), .callbackRejected(""), .logoutTokenRejected(""),
            ].map(\.code))
        check(
            JOSEError.catalogue.map(\.code),
            [
                JOSEError.malformedToken(reason: ""), .tokenTooLarge(limit: 1), .unsupportedAlgorithm(""), .unsupportedCriticalHeader([]),
                .keyAlgorithmMismatch(reason: ""), .invalidSignature, .invalidKey(reason: ""), .noMatchingKey(reason: ""), .cryptoFailure(reason: ""),
                .decryptionFailed, .keySetUnavailable(reason: ""),
            ].map(\.code) + ClaimCheck.allCases.map { JOSEError.claimRejected(check: $0, reason: "").code })
        check(
            DPoPProofError.catalogue.map(\.code),
            [
                DPoPProofError.malformed(reason: ""), .wrongType, .unsupportedAlgorithm(""), .invalidKey(reason: ""), .invalidSignature, .methodMismatch,
                .urlMismatch, .stale, .accessTokenHashMismatch, .nonceMismatch,
            ].map(\.code))
    }
}
