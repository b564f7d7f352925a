import ArgumentParser
import Foundation
import PostgresClient
import ProfileService

extension ProfileServiceCommand {
    /// Prints `openapi.yaml` with the profile fields the database declares, as the service
    /// validates them: what an app team or a contract test should read after an operator added a
    /// field (docs/design.md §11).
    struct OpenAPI: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "openapi",
            abstract: "Print openapi.yaml with the profile fields the database declares.",
            discussion: "Reads profile_fields as `serve` does at start; the rest of the document is --spec as it is.")

        @OptionGroup var database: DatabaseOptions

        @Option(help: "The service's openapi.yaml, whose declared-fields blocks are written again.")
        var spec = "openapi.yaml"

        func run() throws {
            let document: String
            do {
                document = try String(contentsOfFile: spec, encoding: .utf8)
            } catch {
                throw RuntimeFailure(description: "cannot read \(spec): \(error.localizedDescription)")
            }
            let loaded = try withDirectConnection(database) { connection in
                do {
                    return try ProfileFieldCatalog.load(from: connection)
                } catch let error as ProfileFieldCatalogError {
                    throw RuntimeFailure(description: "cannot serve the declared profile fields: \(error)")
                }
            }
            guard case .declared(let catalog) = loaded else {
                throw RuntimeFailure(description: "the database has no profile_fields table: run `profile-service migrate` first")
            }
            print(try catalog.openAPI(rewriting: document), terminator: "")
        }
    }
}
