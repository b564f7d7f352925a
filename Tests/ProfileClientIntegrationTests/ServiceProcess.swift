import Foundation
import TestSupport

extension ServiceProcess {
    /// Starts `serve` on `port` (a free one by default) with JWT authentication, as in
    /// production: writes need a token from ``ServiceProcess/token(subject:scope:)``.
    convenience init(port: Int? = nil, extraArguments: [String] = []) throws {
        try self.init(port: port, arguments: ServiceProcess.jwtArguments + extraArguments)
    }

    var url: URL { URL(string: baseURL)! }

    /// How many `method` requests of the profile route this instance answered with `status`.
    func profileRequests(_ method: String, status: Int) throws -> Double {
        try metrics().requests(route: "/users/profile/{id}", method: method, status: status)
    }
}
