import Testing

@testable import HTTPServer

/// A manual clock's instant: time moves only when the test says so.
struct FakeInstant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> FakeInstant { FakeInstant(offset: offset + duration) }
    func duration(to other: FakeInstant) -> Duration { other.offset - offset }
    static func < (lhs: FakeInstant, rhs: FakeInstant) -> Bool { lhs.offset < rhs.offset }
}

@Suite struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine<FakeInstant>
    let start = FakeInstant(offset: .zero)
    let timeouts = Machine.Timeouts(
        head: .seconds(10), body: .seconds(20), idle: .seconds(75), write: .seconds(5), linger: .seconds(2))

    func at(_ seconds: Double) -> FakeInstant { FakeInstant(offset: .milliseconds(Int(seconds * 1000))) }

    @Test func headDeadlineIsAbsoluteNotPerRead() {
        var machine = Machine(now: start, timeouts: timeouts)
        machine.receivedRequestBytes(now: at(1))
        // A byte every second does not move the deadline.
        for second in 2...10 {
            machine.receivedRequestBytes(now: at(Double(second)))
            #expect(machine.timerFired(now: at(Double(second))) == .none)
        }
        #expect(machine.timerFired(now: at(11)) == .sendRequestTimeout)
    }

    @Test func newConnectionMustSendAHeadInTime() {
        var machine = Machine(now: start, timeouts: timeouts)
        #expect(machine.timerFired(now: at(9.9)) == .none)
        #expect(machine.timerFired(now: at(10)) == .close)
        #expect(machine.state == .closed)
    }

    @Test func bodyDeadlineStartsAfterTheHead() {
        var machine = Machine(now: start, timeouts: timeouts)
        machine.receivedRequestBytes(now: at(1))
        machine.headCompleted(now: at(5))
        #expect(machine.deadline == at(25))
        #expect(machine.timerFired(now: at(24)) == .none)
        #expect(machine.timerFired(now: at(25)) == .sendRequestTimeout)
    }

    @Test func keepAliveCycleUsesTheIdleTimeout() {
        var machine = Machine(now: start, timeouts: timeouts)
        machine.receivedRequestBytes(now: at(1))
        machine.requestDispatched()
        #expect(!machine.isReading)
        #expect(machine.deadline == nil)
        #expect(machine.timerFired(now: at(1000)) == .none, "a request with a worker has no deadline")
        machine.responseStarted(now: at(1000), closeAfter: false)
        #expect(machine.deadline == at(1005))
        #expect(machine.responseWritten(now: at(1001)) == .none)
        #expect(machine.isIdle)
        #expect(machine.deadline == at(1076))
        #expect(machine.timerFired(now: at(1076)) == .close)
    }

    @Test func slowWriteIsCut() {
        var machine = Machine(now: start, timeouts: timeouts)
        machine.receivedRequestBytes(now: at(0))
        machine.requestDispatched()
        machine.responseStarted(now: at(1), closeAfter: false)
        #expect(machine.timerFired(now: at(6)) == .close)
    }

    @Test func closingResponseLingersThenCloses() {
        var machine = Machine(now: start, timeouts: timeouts)
        machine.receivedRequestBytes(now: at(0))
        machine.responseStarted(now: at(0), closeAfter: true)
        #expect(machine.responseWritten(now: at(1)) == .linger)
        #expect(machine.timerFired(now: at(2.5)) == .none)
        #expect(machine.timerFired(now: at(3)) == .close)
    }

    @Test func shutdownClosesIdleAndMarksBusyConnections() {
        var idle = Machine(now: start, timeouts: timeouts)
        #expect(idle.beginShutdown() == .close)

        var busy = Machine(now: start, timeouts: timeouts)
        busy.receivedRequestBytes(now: at(0))
        busy.requestDispatched()
        #expect(busy.beginShutdown() == .none)
        busy.responseStarted(now: at(1), closeAfter: false)
        #expect(busy.state == .writing(deadline: at(6), closeAfter: true))
        #expect(busy.responseWritten(now: at(2)) == .linger)
    }

    @Test func aRequestInAWorkerHasNoDeadlineAndIsNotClosedByShutdown() {
        // The worker may be writing the socket: nothing may close it meanwhile.
        var machine = Machine(now: start, timeouts: timeouts)
        machine.receivedRequestBytes(now: at(1))
        machine.requestDispatched()
        #expect(machine.timerFired(now: at(100_000)) == .none)
        #expect(machine.beginShutdown() == .none)
        #expect(machine.state == .processing)
        // Written by the worker during shutdown: close, as an idle connection would.
        #expect(machine.responseWrittenByWorker(now: at(100_001)) == .close)
        #expect(machine.state == .closed)
    }

    @Test func responseWrittenByTheWorkerStartsTheIdleDeadline() {
        var machine = Machine(now: start, timeouts: timeouts)
        machine.receivedRequestBytes(now: at(1))
        machine.requestDispatched()
        #expect(machine.responseWrittenByWorker(now: at(3)) == .none)
        #expect(machine.isIdle)
        #expect(machine.timerFired(now: at(77.9)) == .none)
        #expect(machine.timerFired(now: at(78)) == .close)
        // Not processing: nothing to do.
        #expect(machine.responseWrittenByWorker(now: at(79)) == .none)
    }
}

@Suite struct StreamingStateTests {
    typealias Machine = ConnectionStateMachine<FakeInstant>
    let timeouts = Machine.Timeouts(
        head: .seconds(1), body: .seconds(1), idle: .seconds(1), write: .seconds(1), linger: .seconds(1))

    @Test func aStreamHasNoDeadlineAndClosesOnShutdown() {
        var machine = Machine(now: FakeInstant(offset: .zero), timeouts: timeouts)
        machine.receivedRequestBytes(now: FakeInstant(offset: .zero))
        machine.requestDispatched()
        machine.streamStarted()
        #expect(machine.isStreaming)
        #expect(!machine.isReading)
        #expect(machine.deadline == nil)
        #expect(machine.timerFired(now: FakeInstant(offset: .seconds(3600))) == .none)
        // Writing its events does not end it.
        #expect(machine.responseWritten(now: FakeInstant(offset: .seconds(3601))) == .none)
        #expect(machine.isStreaming)
        #expect(machine.beginShutdown() == .close)
        #expect(machine.state == .closed)
    }
}

@Suite struct EventStreamsTests {
    @Test func publishingNeedsAWatcherAndOnlyMovesForward() {
        let streams = EventStreams()
        #expect(!streams.publish(topic: 7, position: 1, bytes: [1]), "nobody watches 7")
        streams.retain(topic: 7)
        #expect(streams.isWatched(topic: 7))
        #expect(streams.publish(topic: 7, position: 2, bytes: [2]))
        #expect(!streams.publish(topic: 7, position: 2, bytes: [2]), "the same position twice")
        #expect(!streams.publish(topic: 7, position: 1, bytes: [1]), "an older position")
        #expect(streams.latestPosition(topic: 7) == 2)
        var events: [EventStreams.Event] = []
        streams.takeEvents(loop: 0, into: &events)
        #expect(events.map(\.position) == [2])
        streams.retain(topic: 7)
        streams.release(topic: 7)
        #expect(streams.latestEvent(topic: 7)?.bytes == [2], "kept while a holder remains")
        streams.release(topic: 7)
        #expect(!streams.isWatched(topic: 7))
        #expect(streams.latestPosition(topic: 7) == nil)
        #expect(streams.watchedTopics.isEmpty)
    }
}
