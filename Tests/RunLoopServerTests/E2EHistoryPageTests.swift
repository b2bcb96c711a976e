import Foundation
import RunLoopTestSupport
import Testing

/// `/api/history?limit=N` answers as the docs promise (issue 40: limit=5
/// answered 4): N events, or N + 1 when the last is a perform kept with its
/// request; never fewer while more follow.
@Suite("E2E history pages")
struct E2EHistoryPageTests {
    @Test("limit=1…7 over performs kept with their requests: N or N + 1 events, the pages walk every one")
    func limits() async throws {
        try await withTemporaryPath("page") { dir in
            let server = try await ServerProcess.started(["--data-dir", dir.path, "--instance-id", "pages"])
            defer { server.stop() }
            let c = server.client
            let thread = try await c.createThread(["run": ["style": "loop"]])
            for n in 1...8 {
                #expect(try await c.echo(on: thread, n).status == 200)
            }
            // Written: the 8 performs (and their requests) are in the store.
            let deadline = Date().addingTimeInterval(20)
            var kept = 0
            while kept < 8, Date() < deadline {
                kept = try await c.get("/api/history?type=perform&limit=100")["events"].items.count
            }
            #expect(kept == 8)
            let all = try await c.get("/api/history?limit=1000")["events"].items.count
            for limit in 1...7 {
                let page = try await c.get("/api/history?limit=\(limit)")
                let count = page["events"].items.count
                #expect(count == limit || count == limit + 1, "limit=\(limit): \(count) events")
                // Walking the pages reads every event once.
                var walked = count
                var next = page["next"]
                var pages = 0
                while let cursor = next.string, pages < 100 {
                    let more = try await c.get("/api/history?limit=\(limit)&cursor=\(cursor)")
                    walked += more["events"].items.count
                    next = more["next"]
                    pages += 1
                }
                #expect(walked == all, "limit=\(limit)")
            }
        }
    }
}
