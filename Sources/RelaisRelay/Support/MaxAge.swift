/// `max_age` as every surface reads it (OpenID Connect's at `/authorize`, RFC 9470's at `/auth` and
/// `/userinfo`): decimal digits only, at most ten. A sign, a space or anything else is no age, and
/// the request is refused rather than the requirement dropped.
enum MaxAge {
    static func seconds(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text)
    }
}
