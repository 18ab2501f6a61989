public import HTTPTypes

extension HTTPFields {
    /// How often a request carries a field, and its value when once. HTTPFields' own subscript
    /// joins repeated values into one, which would hide a second `Authorization` or
    /// `Content-Type`; one pass over the fields, no joining.
    public enum Occurrence: Equatable, Sendable {
        case absent
        case once(String)
        case repeated
    }

    public func occurrence(of name: HTTPField.Name) -> Occurrence {
        var found: String?
        for field in self where field.name == name {
            guard found == nil else { return .repeated }
            found = field.value
        }
        return found.map(Occurrence.once) ?? .absent
    }
}
