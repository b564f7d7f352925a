/// A part of the process that runs on threads of its own (the change feed, the live-update
/// listener and fetchers): started once, stopped once, and its threads waited for at most until
/// a deadline. One rule for all, so a shutdown has one deadline and no part waits for ever.
public protocol BackgroundService: AnyObject, Sendable {
    /// For logs: which part did not stop in time.
    var serviceName: String { get }
    func start() throws
    /// Asks the threads to stop and waits for them until `deadline`.
    /// - Returns: whether they finished in time. Calling it again is harmless.
    @discardableResult
    func stop(deadline: ContinuousClock.Instant) -> Bool
}

extension BackgroundService {
    /// Stops within five seconds (tests and one-off tools; `serve` stops its group under the
    /// drain's deadline).
    public func stop() {
        stop(deadline: .now + .seconds(5))
    }
}

/// Background services started in order and stopped in reverse order under one shared deadline,
/// as `serve` runs them.
public final class ServiceGroup: Sendable {
    private let services: [any BackgroundService]

    public init(_ services: [any BackgroundService]) {
        self.services = services
    }

    /// Starts each in order; when one fails, those already started are stopped (in reverse)
    /// before the error is thrown.
    public func start() throws {
        for (index, service) in services.enumerated() {
            do {
                try service.start()
            } catch {
                _ = stop(services[..<index], within: .seconds(5))
                throw error
            }
        }
    }

    /// Stops every service in reverse order, all within `timeout`.
    /// - Returns: the names of those whose threads had not finished by then.
    @discardableResult
    public func stop(within timeout: Duration) -> [String] {
        stop(services[...], within: timeout)
    }

    private func stop(_ services: ArraySlice<any BackgroundService>, within timeout: Duration) -> [String] {
        let deadline = ContinuousClock.now + timeout
        return services.reversed().compactMap { $0.stop(deadline: deadline) ? nil : $0.serviceName }
    }
}
