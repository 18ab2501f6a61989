import RelaisHTTPClient

/// What a resource asks of the sign-in behind a token (RFC 9470): a minimum `acr` on the scale of
/// the provider that signed the person in, and a maximum age of that sign-in. A token that falls
/// short is answered `401 insufficient_user_authentication` with what the next sign-in needs.
struct StepUpRequirement: Sendable, Equatable {
    var acr: String?
    var maxAge: Int?

    /// From `?acr=` and `?max_age=`; nil when neither is given. Unreadable values refuse the request.
    init?(_ options: FormParameters?) throws(RelayError) {
        let acr = options?["acr"]
        var maxAge: Int?
        if let text = options?["max_age"] {
            guard let seconds = MaxAge.seconds(text) else { throw .invalidRequest("max_age must be a number of seconds") }
            maxAge = seconds
        }
        guard acr != nil || maxAge != nil else { return nil }
        self.acr = acr
        self.maxAge = maxAge
    }

    /// `acrOrder`: the levels of the token's provider, lowest first (none: no level can be proven).
    /// `authTime` nil fails any `max_age`. `dpop`: the token is DPoP-bound, so the challenge is too.
    func check(acr have: String?, acrOrder: [String], authTime: Double?, now: Double, dpop: Bool) throws(RelayError) {
        var error: RelayError?
        if let acr {
            if let need = acrOrder.firstIndex(of: acr), let level = have.flatMap(acrOrder.firstIndex(of:)), level >= need {
            } else {
                error = .insufficientUserAuthentication("the sign-in level is below \(acr)", .init(acrValues: acr, maxAge: maxAge))
            }
        }
        if error == nil, let maxAge, authTime.map({ now - $0 > Double(maxAge) }) ?? true {
            error = .insufficientUserAuthentication("the sign-in is older than max_age (\(maxAge) s)", .init(acrValues: acr, maxAge: maxAge))
        }
        guard var error else { return }
        error.challengesDPoP = dpop
        throw error
    }
}
