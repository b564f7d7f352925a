import ArgumentParser
import Foundation
import HTTP1
import ProfileService

extension ProfileServiceCommand {
    /// Prints the API contract as the code states it — every route with its methods, every
    /// problem kind with its status — as JSON, for `scripts/check-deploy.py` to hold `openapi.yaml`
    /// to (no regular expressions over the Swift source). Hidden: a tool's, not an operator's.
    struct APIContract: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "api-contract", abstract: "Print the routes and problem kinds as JSON.",
            shouldDisplay: false)

        func run() throws {
            let contract: [String: Any] = [
                "routes": Dictionary(uniqueKeysWithValues: Route.allCases.map { ($0.rawValue, $0.methods.map(\.rawValue)) }),
                "problem_kinds": Dictionary(uniqueKeysWithValues: ProblemKind.allCases.map { ($0.rawValue, $0.status.code) }),
            ]
            let data = try JSONSerialization.data(withJSONObject: contract, options: [.sortedKeys, .prettyPrinted])
            print(String(decoding: data, as: UTF8.self))
        }
    }
}
