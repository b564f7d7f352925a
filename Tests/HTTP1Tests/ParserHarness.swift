import HTTP1

/// What feeding a whole input to a parser produced.
struct ParseRun {
    var requests: [(request: HTTPRequest, keepAlive: Bool)] = []
    var continueRequests = 0
    var heads = 0
    var error: HTTPParserError?
    /// Bytes consumed in total.
    var consumed = 0
}

/// Feeds `input` to a fresh parser, either all at once or one byte per call (like NIO's
/// `ByteToMessageDecoderVerifier`), collecting every event until the input runs out or an error.
func runParser(_ input: [UInt8], limits: HTTPRequestParser.Limits = .init(), byteByByte: Bool) -> ParseRun {
    var parser = HTTPRequestParser(limits: limits)
    var run = ParseRun()
    var offset = 0
    while offset < input.count {
        let end = byteByByte ? offset + 1 : input.count
        let slice = Array(input[offset..<end])
        var sliceOffset = 0
        repeat {
            do {
                let (consumed, event) = try parser.parse(Array(slice[sliceOffset...]))
                sliceOffset += consumed
                switch event {
                case .needMoreData:
                    precondition(sliceOffset == slice.count, "needMoreData must consume everything")
                case .head(let expectsContinue):
                    run.heads += 1
                    if expectsContinue { run.continueRequests += 1 }
                case .request(let request, let keepAlive):
                    run.requests.append((request, keepAlive))
                }
            } catch {
                run.error = error
                run.consumed = offset + sliceOffset
                return run
            }
        } while sliceOffset < slice.count
        offset = end
    }
    run.consumed = offset
    return run
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
