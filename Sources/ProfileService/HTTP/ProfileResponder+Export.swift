import Foundation
import HTTP1
import Logging

extension ProfileResponder {
    /// `GET /users/profile/{id}/export`: everything the service keeps about the profile, as one
    /// JSON document for its owner or an administrator (``ProfileExport``). Read from the primary,
    /// never from memcached or a standby: an export is rare, and must be the whole truth now.
    /// 404 for an id with no profile, a deleted one included.
    func exportProfile(_ export: ProfileExportRead, worker: ProfileWorker) throws(Problem) -> HTTPResponse {
        let found: ProfileExport?
        do {
            found = try worker.store.export(id: export.id)
        } catch {
            throw Self.problem(for: error)
        }
        guard let found else { throw .notFound(export.id) }
        logger.info("profile exported", metadata: ["id": "\(export.id)"])
        return HTTPResponse(
            status: .ok,
            headers: [
                "Content-Type": "application/json",
                // Personal data: kept by no cache, the client's own included.
                "Cache-Control": "private, no-store",
                "Content-Disposition": #"attachment; filename="profile-\#(export.id).json""#,
            ],
            body: found.document(catalog: profileFields, exportedAt: Self.exportTimestamp()))
    }

    /// Now, RFC 3339 in UTC to the millisecond.
    private static func exportTimestamp() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date())
    }
}
