import HTTPTypes

/// Every sentence of Relais' pages, in one language: a translation is one value of this type, in
/// a file of its own (`PageStrings+French.swift`, `PageStrings+English.swift`), and a test checks
/// that each language has every sentence. Sentences hold no markup; `{1}`, `{2}`, `{3}` stand for
/// arguments, which are HTML the caller has already escaped.
struct PageStrings: Sendable {
    let texts: [PageText: String]
    /// What an error page says, per situation.
    let messages: [PageMessage: String]

    subscript(_ text: PageText) -> String { texts[text] ?? "" }

    /// `text` with its `{n}` replaced by `arguments[n - 1]`, in one pass.
    func format(_ text: PageText, _ arguments: String...) -> String {
        var result = ""
        var rest = Substring(self[text])
        while let open = rest.firstIndex(of: "{") {
            result += rest[..<open]
            let digit = rest.index(after: open)
            if digit < rest.endIndex, let number = rest[digit].wholeNumberValue, number >= 1, number <= arguments.count,
                rest.index(after: digit) < rest.endIndex, rest[rest.index(after: digit)] == "}"
            {
                result += arguments[number - 1]
                rest = rest[rest.index(digit, offsetBy: 2)...]
            } else {
                result.append("{")
                rest = rest[digit...]
            }
        }
        return result + rest
    }

    /// The sentence for an error page: the situation's own, else the code's, else by status.
    func message(_ error: RelayError) -> String {
        let key = error.pageMessage ?? PageMessage(code: error.code)
        return messages[key] ?? messages[error.code.status.code >= 500 ? .unavailable : .invalidRequest] ?? ""
    }
}

/// The sentences of Relais' pages.
enum PageText: String, Sendable, CaseIterable {
    case needHelp, errorTitle, errorHeading, errorAdvice, codeLabel, referenceLabel
    // An error met on the way to approving a device: the way back to its page.
    case errorAdviceDevice, backToDevice
    // Devices (RFC 8628) at /device. deviceAsks: {1} app name, {2} client_id, {3} scopes.
    case deviceTitle, deviceEntryIntro, deviceCodeLabel, continueButton, deviceAsks, deviceRequestedAt, deviceRequestedFrom, deviceOwnName
    case deviceCheckCode, deviceSignInToApprove, deviceDeny, deviceDeniedHeading, deviceDeniedText, deviceApprovedHeading, deviceApprovedText
    // A session code over another person's web session.
    case switchTitle, switchSignedInAs, switchLinkSignsIn, switchIgnore, switchContinue, someoneElse
    // A sign-out another site asked for.
    case logoutTitle, logoutAsked, logoutConfirm
    // A sign-out that named no post_logout_redirect_uri, done.
    case loggedOutTitle, loggedOutText
}

/// The situations an error page explains to a person, each with its sentence in every language.
enum PageMessage: String, Sendable, CaseIterable {
    case invalidRequest, unknownClient, invalidRedirect, transactionExpired, signInFailed
    case noSuchDeviceRequest, notAUserCode, deviceAppGone, deviceAlreadyDecided, signInOtherBrowser
    case sessionCodeInvalid, sessionCodeCrossSite, notFromOurPage
    case logoutHintTooOld, logoutHintOtherSession
    case tooManyRequests, unavailable

    /// The default situation of an error code shown on a page.
    init(code: RelayError.Code) {
        switch code {
        case .unknownClient, .invalidClient: self = .unknownClient
        case .invalidRedirectURI: self = .invalidRedirect
        case .transactionExpired: self = .transactionExpired
        case .invalidUserCode: self = .noSuchDeviceRequest
        case .invalidSessionCode: self = .sessionCodeInvalid
        case .tooManyRequests: self = .tooManyRequests
        case .temporarilyUnavailable: self = .unavailable
        default: self = code.status.code >= 500 ? .unavailable : .invalidRequest
        }
    }
}
