import Foundation
import HTTP1
import HTTPServer
import Testing
import TestSupport

/// Runs a program to completion and returns its standard output and exit status.
func run(_ executable: String, _ arguments: [String]) throws -> (output: String, status: Int32) {
    let finished = try TestProcess.run(URL(fileURLWithPath: executable), arguments)
    return (finished.standardOutput, finished.status)
}

func python3() -> String {
    for candidate in ["/usr/bin/python3", "/usr/local/bin/python3"]
    where FileManager.default.isExecutableFile(atPath: candidate) {
        return candidate
    }
    return "/usr/bin/env"
}

@Suite struct RealClientTests {
    @Test func curl() throws {
        try withServer(EchoResponder()) { port, _ in
            let base = "http://127.0.0.1:\(port)"
            let get = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "-i", "\(base)/profiles/1?x=2"])
            #expect(get.status == 0)
            #expect(get.output.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(get.output.contains("X-Query: x=2\r\n"))
            #expect(get.output.hasSuffix("GET /profiles/1"))

            // Over 1 KiB, curl sends Expect: 100-continue and waits for the interim response.
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("http-body-\(port).bin")
            let payload = String(repeating: "0123456789abcdef", count: 256)
            try payload.write(to: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: file) }
            let post = try run(
                "/usr/bin/curl",
                [
                    "-sS", "--max-time", "10", "--expect100-timeout", "5", "-X", "POST", "--data-binary",
                    "@\(file.path)",
                    "-w", "\n%{http_code}", "\(base)/upload",
                ])
            #expect(post.output == payload + "\n200")

            let chunked = try run(
                "/usr/bin/curl",
                ["-sS", "--max-time", "10", "-H", "Transfer-Encoding: chunked", "--data-binary", "chunky", "\(base)/c"])
            #expect(chunked.output == "chunky")

            let head = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "-I", "\(base)/h"])
            #expect(head.output.contains("Content-Length: 7\r\n"))

            let old = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "--http1.0", "-i", "\(base)/old"])
            #expect(old.output.contains("Connection: close\r\n"))

            // Several URLs on one connection: keep-alive reuse.
            let reuse = try run(
                "/usr/bin/curl", ["-sS", "--max-time", "10", "-v", "\(base)/a", "\(base)/b"])
            #expect(reuse.output == "GET /aGET /b")
        }
    }

    @Test func pythonHTTPClient() throws {
        try withServer(EchoResponder()) { port, _ in
            let script = """
                import http.client, json
                c = http.client.HTTPConnection("127.0.0.1", \(port), timeout=10)
                out = []
                c.request("GET", "/py?q=1"); r = c.getresponse(); out.append([r.status, r.getheader("X-Query"), r.read().decode()])
                c.request("POST", "/py", body=b"x" * 3000, headers={"Content-Type": "application/octet-stream"})
                r = c.getresponse(); out.append([r.status, r.getheader("X-Body-Length"), len(r.read())])
                c.request("HEAD", "/py"); r = c.getresponse(); out.append([r.status, r.getheader("Content-Length"), r.read().decode()])
                c.request("GET", "/", headers={"Connection": "close"}); r = c.getresponse(); out.append([r.status, r.getheader("Connection"), r.read().decode()])
                print(json.dumps(out))
                """
            let arguments = python3() == "/usr/bin/env" ? ["python3", "-c", script] : ["-c", script]
            let result = try run(python3(), arguments)
            #expect(result.status == 0)
            #expect(
                result.output.trimmingCharacters(in: .whitespacesAndNewlines)
                    == #"[[200, "q=1", "GET /py"], [200, "3000", 3000], [200, "8", ""], [200, "close", "GET /"]]"#)
        }
    }
}
