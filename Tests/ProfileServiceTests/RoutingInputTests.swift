import HTTP1
import Testing

@testable import ProfileService

@Suite struct RoutingInputTests {
    @Test(arguments: [("/users/profile/1", Int64(1)), ("/users/profile/9223372036854775807", Int64.max)])
    func validIDs(path: String, id: Int64) throws {
        #expect(try ProfileResponder.profileID(from: path) == id)
    }

    @Test(arguments: ["0", "-1", "+1", "01", "1.0", "abc", "9223372036854775808", "1%20", " 1"])
    func invalidIDsAre400(text: String) {
        do {
            _ = try ProfileResponder.profileID(from: "/users/profile/" + text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.status.code == 400)
            #expect(error.field == "id")
        }
    }

    @Test(arguments: ["/users/profile/", "/users/profile/1/", "/users/profile/1/extra"])
    func otherPathsAre404(path: String) {
        do {
            _ = try ProfileResponder.profileID(from: path)
            Issue.record("accepted \(path)")
        } catch {
            #expect(error.status.code == 404)
        }
    }

    /// `If-None-Match` names the version the client holds: the read never answers below it
    /// (issue 25; docs/design.md §2.1).
    @Test func ifNoneMatchNamesTheHighestVersionHeld() {
        #expect(ProfileResponder.highestVersion(named: #""7""#) == 7)
        #expect(ProfileResponder.highestVersion(named: #"W/"3", "12", "9""#) == 12)
        #expect(ProfileResponder.highestVersion(named: "*") == nil)
        #expect(ProfileResponder.highestVersion(named: #""abc", "0", "-1", "", "2147483648""#) == nil, "not versions")
    }

    @Test func ifNoneMatchUsesWeakComparison() {
        #expect(ProfileResponder.entityTags(#""3""#, contain: #""3""#))
        #expect(ProfileResponder.entityTags(#"W/"3""#, contain: #""3""#))
        #expect(ProfileResponder.entityTags(#""1", "3""#, contain: #""3""#))
        #expect(ProfileResponder.entityTags("*", contain: #""3""#))
        #expect(!ProfileResponder.entityTags(#""4""#, contain: #""3""#))
    }

    @Test func ifMatchTakesOneStrongTag() throws {
        #expect(try ProfileResponder.ifMatchVersion(#""12""#) == 12)
        #expect(try ProfileResponder.ifMatchVersion(nil) == nil)
        for bad in ["12", #"W/"12""#, #""0""#, #""a""#, #""1", "2""#] {
            #expect(throws: ProfileRequestError.self) { try ProfileResponder.ifMatchVersion(bad) }
        }
    }

    @Test func ifMatchVersionsAreCanonicalAndFitInt32() throws {
        #expect(try ProfileResponder.ifMatchVersion(#""2147483647""#) == Int32.max)
        for bad in [#""2147483648""#, #""01""#, #""+1""#, #""-1""#, #"" 1""#] {
            #expect(throws: ProfileRequestError.self) { try ProfileResponder.ifMatchVersion(bad) }
        }
    }

    @Test func aWriteTakesOnlyIfNoneMatchStar() throws {
        #expect(try ProfileResponder.ifNoneMatchAny("*") == true)
        #expect(try ProfileResponder.ifNoneMatchAny(nil) == false)
        for bad in [#""1""#, "W/\"1\"", "**", ""] {
            #expect(throws: ProfileRequestError.self) { try ProfileResponder.ifNoneMatchAny(bad) }
        }
    }

    @Test func jsonMediaTypes() {
        #expect(ProfileResponder.isJSON("application/json"))
        #expect(ProfileResponder.isJSON("application/json; charset=utf-8"))
        #expect(ProfileResponder.isJSON("application/merge-patch+json"))
        #expect(!ProfileResponder.isJSON("text/plain"))
        #expect(!ProfileResponder.isJSON("application/x-www-form-urlencoded"))
    }

    /// The check every request gets on its loop agrees with the methods each route documents.
    @Test(arguments: Route.allCases)
    func aRouteAnswersExactlyItsMethods(route: Route) {
        let every: [HTTPMethod] = [.get, .head, .put, .post, .patch, .delete, .options]
        #expect(every.filter(route.answers) == every.filter(route.methods.contains))
    }
}
