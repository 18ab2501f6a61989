import Foundation

/// Base64url without padding (RFC 7515 §2), as every JOSE member and PKCE value is written.
enum Base64URL {
    static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

/// A JSON value as Relais sends it, decoded with JSONDecoder (which tells booleans from numbers
/// on every platform).
enum KitJSON: Decodable, Sendable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([KitJSON])
    case object([String: KitJSON])
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let list = try? container.decode([KitJSON].self) {
            self = .array(list)
        } else {
            self = .object(try container.decode([String: KitJSON].self))
        }
    }
}

enum JSONReading {
    static func object(_ data: Data) -> [String: KitJSON]? {
        try? JSONDecoder().decode([String: KitJSON].self, from: data)
    }

    /// A compact JSON object with its members in the given order (JWT headers and claims).
    static func serialize(_ members: [(String, JSONScalar)]) -> String {
        "{" + members.map { "\(quote($0.0)):\($0.1.json)" }.joined(separator: ",") + "}"
    }

    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// A JSON member value in a JWT this library writes.
enum JSONScalar: Sendable {
    case string(String)
    case integer(Int)
    /// Already serialized JSON (a nested object such as `jwk`).
    case raw(String)

    var json: String {
        switch self {
        case .string(let text): JSONReading.quote(text)
        case .integer(let number): String(number)
        case .raw(let json): json
        }
    }
}

extension Dictionary where Key == String, Value == KitJSON {
    func string(_ key: String) -> String? {
        if case .string(let text)? = self[key] { return text }
        return nil
    }
    func int(_ key: String) -> Int? {
        if case .number(let number)? = self[key] { return Int(number) }
        return nil
    }
    func bool(_ key: String) -> Bool? {
        if case .bool(let flag)? = self[key] { return flag }
        return nil
    }
    func object(_ key: String) -> [String: KitJSON]? {
        if case .object(let object)? = self[key] { return object }
        return nil
    }
    func array(_ key: String) -> [KitJSON]? {
        if case .array(let list)? = self[key] { return list }
        return nil
    }
}
