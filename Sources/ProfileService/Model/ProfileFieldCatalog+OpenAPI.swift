/// `openapi.yaml` for these declarations: every block between the `# declared fields: begin` and
/// `# declared fields: end` comments (the properties of `Profile`, `UpdateRequest`,
/// `CreateRequest` and `ProfilePatch`) written again from the catalog, so an operator's field is
/// described exactly as the service validates it (`profile-service openapi`).
extension ProfileFieldCatalog {
    static let openAPIBegin = "# declared fields: begin"
    static let openAPIEnd = "# declared fields: end"

    public enum OpenAPIError: Error, Equatable, CustomStringConvertible {
        /// The document has no block to fill, or a block without its end.
        case noDeclaredFieldsBlock

        public var description: String {
            "the document has no \"\(ProfileFieldCatalog.openAPIBegin)\" … \"\(ProfileFieldCatalog.openAPIEnd)\" block (is it the service's openapi.yaml?)"
        }
    }

    /// `document` with each declared-fields block replaced by these fields, indented as the block was.
    public func openAPI(rewriting document: String) throws(OpenAPIError) -> String {
        var output: [Substring] = []
        var replaced = 0
        var inBlock = false
        for line in document.split(separator: "\n", omittingEmptySubsequences: false) {
            let content = line.drop { $0 == " " }
            if inBlock {
                if content.hasPrefix(Self.openAPIEnd) {
                    output.append(line)
                    inBlock = false
                }
                continue
            }
            output.append(line)
            if content.hasPrefix(Self.openAPIBegin) {
                let indent = String(repeating: " ", count: line.count - content.count)
                output.append(contentsOf: declarations.map { Substring(indent + $0.openAPIProperty) })
                inBlock = true
                replaced += 1
            }
        }
        guard replaced > 0, !inBlock else { throw .noDeclaredFieldsBlock }
        return output.joined(separator: "\n")
    }
}

extension ProfileFieldDeclaration {
    /// The field's schema on one line: `null` when unset, and the bound and pattern the service
    /// checks (``VisibleText``, ``ProfileValidation/isHTTPSURL(_:)``).
    var openAPIProperty: String {
        let (pattern, what): (String, String)
        switch kind {
        case .text:
            pattern = VisibleText.pattern(allowsLineFeeds: false, requiresVisible: false)
            what = "one line of visible text, at most \(maximumLength) code points (NFC)"
        case .paragraph:
            pattern = VisibleText.pattern(allowsLineFeeds: true, requiresVisible: false)
            what = "visible text with line feeds, at most \(maximumLength) code points (NFC)"
        case .httpsURL:
            pattern = ProfileValidation.httpsURLPattern
            what = "an https URL of a host name, at most \(maximumLength) characters"
        case .email:
            pattern = ProfileValidation.emailPattern
            what = "an email address, at most \(maximumLength) characters"
        case .date:
            pattern = ProfileValidation.datePattern
            what = "a calendar date YYYY-MM-DD"
        }
        let readers = readBy == .owner ? "; read by the owner and administrators only, absent from others' answers" : ""
        let writers = writtenBy == .admin ? "; written by holders of profiles:admin only" : ""
        // The key quoted: bare, YAML reads `null`, `on` or `true` as no string at all.
        return "'\(name)': {type: [string, 'null'], maxLength: \(maximumLength), pattern: \(VisibleText.yamlDoubleQuoted(pattern)), "
            + "description: '\(what); null when unset\(readers)\(writers)'}"
    }
}
