import Foundation

/// Unpadded base64url (RFC 7515 §2, Appendix C), strict: only the URL-safe alphabet.
enum Base64URL {
    static func decode(_ text: Substring) -> [UInt8]? {
        var base64 = ""
        base64.reserveCapacity(text.utf8.count + 3)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9": base64.unicodeScalars.append(scalar)
            case "-": base64.append("+")
            case "_": base64.append("/")
            default: return nil
            }
        }
        switch base64.utf8.count % 4 {
        case 2: base64 += "=="
        case 3: base64 += "="
        case 1: return nil
        default: break
        }
        return Data(base64Encoded: base64).map { Array($0) }
    }

    static func encode(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
