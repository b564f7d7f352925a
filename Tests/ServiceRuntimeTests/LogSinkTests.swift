import Foundation
import Glibc
import ServiceRuntime
import Testing

/// ``LogSink`` over a real pipe: whole lines from many threads, a bounded buffer that drops and
/// counts when nobody reads, and a flush that writes everything appended before it.
@Suite struct LogSinkTests {
    /// A pipe whose read end a thread drains into memory until EOF.
    final class PipeReader: @unchecked Sendable {  // @unchecked: `bytes` is read only after `finished`
        let readFD: Int32
        let writeFD: Int32
        private var bytes: [UInt8] = []
        private let finished = DispatchSemaphore(value: 0)

        init() throws {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw POSIXError(.EMFILE) }
            (readFD, writeFD) = (ends[0], ends[1])
        }

        /// Starts draining the read end.
        func start() {
            Thread.detachNewThread { [self] in
                var chunk = [UInt8](repeating: 0, count: 64 * 1024)
                while true {
                    let count = read(readFD, &chunk, chunk.count)
                    if count > 0 {
                        bytes.append(contentsOf: chunk[0..<count])
                    } else if count == 0 || errno != EINTR {
                        break
                    }
                }
                finished.signal()
            }
        }

        /// Closes the write end and returns every line read, once the reader saw EOF.
        func finish() -> [Substring] {
            close(writeFD)
            finished.wait()
            close(readFD)
            return String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
                .dropLast().map { $0 }
        }
    }

    static func write(_ text: String, to sink: LogSink) {
        var text = text
        text.withUTF8 { sink.write(UnsafeRawBufferPointer($0)) }
    }

    @Test(.timeLimit(.minutes(1))) func linesFromSixteenThreadsNeverInterleaveOrGetLost() throws {
        let pipe = try PipeReader()
        pipe.start()
        var configuration = LogSink.Configuration()
        configuration.bufferCount = 4  // four threads per buffer: appends contend for its lock
        configuration.bufferCapacity = 1 << 20  // room for every line even if the writer never ran
        let sink = LogSink(fd: pipe.writeFD, configuration: configuration)
        let writers = 16, linesEach = 500
        let group = DispatchGroup()
        for writer in 0..<writers {
            group.enter()
            Thread.detachNewThread {
                for sequence in 0..<linesEach {
                    let padding = String(repeating: "x", count: (writer * 7 + sequence) % 90)
                    Self.write("writer=\(writer) seq=\(sequence) pad=\(padding) end\n", to: sink)
                }
                group.leave()
            }
        }
        group.wait()
        #expect(sink.close())
        let lines = pipe.finish()
        #expect(sink.droppedLines == 0)
        #expect(lines.count == writers * linesEach)
        var seen = Set<String>()
        for line in lines {
            let fields = line.split(separator: " ")
            let padding = fields.count == 4 ? fields[2].dropFirst(4) : ""
            let isWhole =
                fields.count == 4 && fields[0].hasPrefix("writer=") && fields[1].hasPrefix("seq=")
                && fields[3] == "end" && padding.allSatisfy { $0 == "x" }
            #expect(isWhole, "interleaved or torn line: \(line)")
            seen.insert("\(fields.first ?? "") \(fields.dropFirst().first ?? "")")
        }
        #expect(seen.count == writers * linesEach, "every line exactly once")
    }

    @Test(.timeLimit(.minutes(1))) func aReaderThatStopsCostsDroppedLinesNotAWait() throws {
        let pipe = try PipeReader()  // nobody reads yet: the pipe fills, the writer thread blocks
        var configuration = LogSink.Configuration()
        configuration.bufferCount = 1
        configuration.bufferCapacity = 8 * 1024
        configuration.flushThreshold = 1024
        let sink = LogSink(fd: pipe.writeFD, configuration: configuration)
        let line = String(repeating: "y", count: 99) + "\n"
        let total = 20_000  // 2 MB: far more than the pipe (64 KiB) and the buffer hold
        for _ in 0..<total { Self.write(line, to: sink) }  // returns although nothing is read
        let droppedWhileBlocked = sink.droppedLines
        #expect(droppedWhileBlocked > 0)
        #expect(droppedWhileBlocked < total)

        pipe.start()
        #expect(sink.flush(timeout: .seconds(30)), "once stderr drains, the flush completes")
        #expect(sink.close())
        let lines = pipe.finish()
        #expect(lines.allSatisfy { $0.utf8.count == 99 }, "no torn line")
        #expect(lines.count + sink.droppedLines == total, "every line written or counted as dropped")
    }

    @Test(.timeLimit(.minutes(1))) func flushWritesEverythingAppendedBefore() throws {
        let pipe = try PipeReader()
        var configuration = LogSink.Configuration()
        configuration.flushInterval = .seconds(3600)  // only the flush writes
        let sink = LogSink(fd: pipe.writeFD, configuration: configuration)
        Self.write("first\n", to: sink)
        Self.write("second\n", to: sink)
        #expect(sink.flush())
        var chunk = [UInt8](repeating: 0, count: 64)
        let count = read(pipe.readFD, &chunk, chunk.count)  // written already: does not block
        #expect(String(decoding: chunk[0..<max(count, 0)], as: UTF8.self) == "first\nsecond\n")
        #expect(sink.close())
        Self.write("late\n", to: sink)
        #expect(sink.droppedLines == 1, "a line after close is dropped and counted")
        pipe.start()
        #expect(pipe.finish().isEmpty)
    }
}

@Suite struct LogLineTests {
    static func text(_ format: LogLine.Format, _ build: (inout LogLine) -> Void) -> String {
        var line = LogLine(format: format)
        line.begin(level: "info", logger: "test", message: "hello world")
        build(&line)
        line.end()
        return String(decoding: line.bytes, as: UTF8.self)
    }

    @Test func logfmtQuotesOnlyWhatNeedsIt() throws {
        let text = Self.text(.logfmt) { line in
            line.append("path", #"/a "b"=c"#)
            line.append("plain", "GET")
            line.append("empty", "")
            line.append("status", integer: 404)
            line.append("duration_ms", milliseconds: 1_234_567)
            line.append("control", "a\u{1}\u{85}\u{2028}é\n")
        }
        let pattern = #/^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info logger=test msg="hello world" /#
        #expect(text.contains(pattern))
        #expect(text.hasSuffix(
            #"path="/a \"b\"=c" plain=GET empty="" status=404 duration_ms=1.234 control="a\u0001\u0085\u2028é\n""# + "\n"))
    }

    @Test func aReusedLineStartsAfreshEachTime() throws {
        var line = LogLine(format: .logfmt)
        var texts: [String] = []
        for message in ["request", "request", "other message"] {
            line.begin(level: "info", logger: "test", message: message)
            line.append("n", integer: texts.count)
            line.end()
            texts.append(String(decoding: line.bytes, as: UTF8.self))
        }
        #expect(texts[0].hasSuffix(" level=info logger=test msg=request n=0\n"))
        #expect(texts[1].hasSuffix(" level=info logger=test msg=request n=1\n"))
        #expect(texts[2].hasSuffix(#" level=info logger=test msg="other message" n=2"# + "\n"))
        #expect(texts.allSatisfy { $0.hasPrefix("ts=") && $0.filter { $0 == "\n" }.count == 1 })
    }

    @Test func jsonIsOneObjectOfStrings() throws {
        let text = Self.text(.json) { line in
            line.append("status", integer: 200)
            line.append("duration_ms", milliseconds: 210_000)
            line.append("path", Substring("/users/\"x\"\\"))
        }
        #expect(text.hasSuffix("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
        #expect(object["status"] == "200")
        #expect(object["duration_ms"] == "0.210")
        #expect(object["path"] == "/users/\"x\"\\")
        #expect(object["msg"] == "hello world")
        #expect(object["ts"]?.hasSuffix("Z") == true)
    }
}
