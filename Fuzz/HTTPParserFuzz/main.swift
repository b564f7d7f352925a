// libFuzzer target over the HTTP1 request parser. Built by scripts/http-fuzz.sh, which compiles the
// HTTP1 sources into this same module (hence no `import HTTP1`).
//
// Besides "no crash, no sanitizer report", it checks invariants that a smuggling bug would break:
// the same bytes give the same requests and the same error whether fed whole, one byte at a time,
// or in the split chosen by the first input byte; limits always hold on accepted requests.

let fuzzLimits = HTTPRequestParser.Limits(
    maxRequestLineBytes: 256, maxHeaderBytes: 512, maxHeaderCount: 8, maxBodyBytes: 1024)

struct Outcome: Equatable {
    var requests: [String] = []
    var error: HTTPParserError.Code?
    var continues = 0
}

func describe(_ request: HTTPRequest, keepAlive: Bool) -> String {
    let headers = request.headers.map { "\($0.name)=\($0.value)" }.joined(separator: "|")
    return "\(request.method) \(request.target) \(request.version) \(headers) \(request.body) \(keepAlive)"
}

func feed(_ input: UnsafeBufferPointer<UInt8>, chunk: Int) -> Outcome {
    var parser = HTTPRequestParser(limits: fuzzLimits)
    var outcome = Outcome()
    var offset = 0
    while offset < input.count {
        let end = min(offset + chunk, input.count)
        var position = offset
        while position < end {
            do {
                let (consumed, event) = try parser.parse(UnsafeBufferPointer(rebasing: input[position..<end]))
                precondition(consumed <= end - position, "consumed more than given")
                position += consumed
                switch event {
                case .needMoreData:
                    precondition(position == end, "needMoreData left bytes unconsumed")
                case .head(let expectsContinue):
                    precondition(consumed > 0, "a head without bytes")
                    if expectsContinue { outcome.continues += 1 }
                case .request(let request, let keepAlive):
                    precondition(request.body.count <= fuzzLimits.maxBodyBytes, "body over the limit")
                    precondition(request.headers.count <= fuzzLimits.maxHeaderCount, "too many headers")
                    precondition(request.target.utf8.count <= fuzzLimits.maxRequestLineBytes, "target over the limit")
                    outcome.requests.append(describe(request, keepAlive: keepAlive))
                }
            } catch {
                outcome.error = error.code
                return outcome
            }
        }
        offset = end
    }
    return outcome
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let input = UnsafeBufferPointer(start: data + 1, count: size - 1)
    let whole = feed(input, chunk: max(input.count, 1))
    let bytewise = feed(input, chunk: 1)
    let split = feed(input, chunk: Int(data[0] % 17) + 2)
    precondition(whole == bytewise, "whole vs byte-by-byte differ: \(whole) / \(bytewise)")
    precondition(whole == split, "whole vs split differ: \(whole) / \(split)")
    return 0
}
