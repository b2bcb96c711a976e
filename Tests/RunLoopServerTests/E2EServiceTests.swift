import MicroHTTP
import Foundation
import RunLoopCore
import RunLoopServer
import RunLoopTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The event stream, load, and graceful shutdown, against the real binary.
@Suite("E2E service")
struct E2EServiceTests {
    @Test("SSE delivers a run-exit event after a stop")
    func eventStreamRunExit() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread(["run": ["style": "loop", "seconds": 30]])
            let stream = try EventStreamClient<Value>(port: server.port, path: "/api/events?thread=\(t)")
            defer { stream.disconnect() }
            let hello = stream.next(timeout: 10) { $0.name == "hello" }
            #expect(stream.state.value.status == 200)
            #expect(hello?.data["threads"].items.contains { $0["id"] == .string(t) } == true)
            try await c.waitUntilWaiting(t)
            let stoppedAt = Date()
            let stop = try await c.post("/api/threads/\(t)/stop")
            #expect(stop["exitReason"] == "stopped")
            let event = stream.next(timeout: 5) { $0.name == "run-exit" && $0.data["exitReason"] == "stopped" }
            let received = try #require(event)
            #expect(received.data["thread"] == .string(t))
            // About 1 ms alone; the time is printed, not judged (1.6 s was
            // seen under ThreadSanitizer beside dozens of servers).
            print("run-exit event \(received.receivedAt.timeIntervalSince(stoppedAt)) s after the stop was asked")
        }
    }

    @Test("200 concurrent requests from several client threads are all answered")
    func concurrentRequests() async throws {
        try await ServerProcess.with(["--max-connections-per-ip", "512"]) { server in
            let c = server.client
            let t = try await c.createThread()
            let threads = 8
            let perThread = 25
            let results = Monitor([Int]())
            for index in 0..<threads {
                Thread.detachNewThread {
                    var statuses: [Int] = []
                    // Open every connection and send every request first, then read:
                    // all 200 are in flight at once.
                    var sockets: [(Int32, Int)] = []
                    for k in 0..<perThread {
                        let request: [UInt8]
                        switch (index + k) % 3 {
                        case 0:
                            request = HTTPWire.request("GET", "/api/version", body: nil, contentType: nil, headers: [])
                        case 1:
                            request = HTTPWire.request(
                                "GET", "/api/threads/\(t)", body: nil, contentType: nil, headers: [])
                        default:
                            request = HTTPWire.request(
                                "POST", "/api/threads/\(t)/perform", body: Array(#"{"selector":"echo"}"#.utf8),
                                contentType: "application/json", headers: [])
                        }
                        guard let socket = try? TestHTTPConnection(port: server.port, timeout: 30) else {
                            statuses.append(-1)
                            continue
                        }
                        _ = socket.write(request)
                        sockets.append((dup(socket.fd), k))
                    }
                    for (fd, _) in sockets {
                        var data: [UInt8] = []
                        var buffer = [UInt8](repeating: 0, count: 8192)
                        var tv = timeval(tv_sec: 30, tv_usec: 0)
                        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                        while true {
                            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                            if n <= 0 { break }
                            data += buffer[0..<n]
                        }
                        close(fd)
                        statuses.append(HTTPWire.parseHead(data)?.status ?? -1)
                    }
                    let finished = statuses
                    results.update { $0 += finished }
                }
            }
            let all = await offThePool { results.wait(timeout: 60) { $0.count == threads * perThread } }
            #expect(all)
            let statuses = results.value
            #expect(statuses.count == 200)
            #expect(statuses.allSatisfy { $0 == 200 || $0 == 202 }, "\(statuses.filter { $0 != 200 && $0 != 202 })")
            #expect(try await c.get("/healthz").status == 200)
        }
    }

    @Test("SIGTERM answers every suspended request and exits 0 (within its 5 s grace, given 10 s under load)")
    func gracefulShutdown() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        let c = server.client
        let manual = try await c.manualThread()
        let busy = try await c.manualThread()
        let answers = Monitor([Int]())
        func inFlight(_ path: String, _ body: Value) {
            Thread.detachNewThread {
                let response = try? c.sendBlocking(
                    "POST", path, body: JSON.serialize(body), contentType: "application/json", timeout: 30)
                answers.update { $0.append(response?.status ?? -1) }
            }
        }
        for _ in 0..<5 {
            inFlight("/api/threads/\(manual)/perform", ["selector": "echo", "waitUntilDone": true, "timeout": 60])
        }
        inFlight("/api/threads/\(busy)/run", ["seconds": 60])
        _ = try await c.poll("/api/threads/\(manual)") { $0["counts", "pendingPerforms"] == 5 }
        try await c.waitUntilWaiting(busy)
        let signalledAt = Date()
        server.send(signal: SIGTERM)
        // Alone it takes about 0.1 s; with the whole suite in parallel on two vCPUs it
        // once took 5.002 s, so the bound is twice the 5 s grace rather than the grace
        // (scaled under ThreadSanitizer, whose servers run several times slower).
        let bound = 10 * ServerProcess.slowdown
        let status = await server.exited(timeout: bound)
        #expect(status == 0, "\(server.log)")
        #expect(Date().timeIntervalSince(signalledAt) < bound)
        #expect(await offThePool { answers.wait(timeout: 5) { $0.count == 6 } })
        let statuses = answers.value
        #expect(statuses.count == 6)
        #expect(statuses.allSatisfy { $0 > 0 }, "every suspended request got an HTTP answer: \(statuses)")
        #expect(server.log.contains("runloopd stopped"))
    }

    @Test("SIGTERM drains: /readyz 503 at once, the API still served; a second SIGTERM ends the drain, exit 0")
    func drainOnSigterm() async throws {
        // A drain far longer than the test waits: what ends it in time is the second signal.
        let server = try await ServerProcess.started(["--drain-delay", "600"])
        defer { server.stop(signal: SIGKILL) }
        let c = server.client
        #expect(try await c.get("/readyz").status == 200)
        server.send(signal: SIGTERM)
        #expect(await server.logged(timeout: 10) { $0.contains("drain started") }, "\(server.log)")
        // The drain began before its line was queued: /readyz says 503 from now on.
        let ready = try await c.get("/readyz")
        #expect(ready.status == 503)
        #expect(ready["error", "message"].string?.contains("draining") == true, "\(ready)")
        // Everything else is still served, and state still changes.
        #expect(try await c.get("/api/version").status == 200)
        #expect(try await c.get("/healthz").status == 200)
        let thread = try await c.createThread()
        #expect(try await c.get("/api/threads/\(thread)").status == 200)
        #expect(server.output.value.exitStatus == nil, "still running during the drain")
        server.send(signal: SIGTERM)
        #expect(await server.exited(timeout: 30 * ServerProcess.slowdown) == 0, "\(server.log)")
        let log = server.log
        #expect(log.contains("drain ended: a second SIGTERM ended it early"), "\(log)")
        #expect(log.contains("runloopd stopped"), "\(log)")
        #expect(!log.contains("stop watchdog"), "\(log)")
    }

    @Test("a drain ends by itself once --drain-delay has passed, then the stop exits 0")
    func drainDelayPasses() async throws {
        let server = try await ServerProcess.started(["--drain-delay", "0.5"])
        defer { server.stop(signal: SIGKILL) }
        server.send(signal: SIGTERM)
        #expect(await server.exited(timeout: 30 * ServerProcess.slowdown) == 0, "\(server.log)")
        let log = server.log
        #expect(log.contains("drain started"), "\(log)")
        #expect(log.contains("drain ended: the drain delay passed"), "\(log)")
        #expect(log.contains("runloopd stopped"), "\(log)")
    }

    @Test("SIGTERM while two handlers sleep 60 s: the stop keeps to its 4 s bound, writes the store and exits 0")
    func stopIsBoundedWhileHandlersAreBusy() async throws {
        // 60 s sleeps (the default limit is 10 s): under ThreadSanitizer, with the suite's
        // other tests on 2 cores, the SIGTERM once came 8 s after 10 s sleeps began, and
        // both sleeps ended inside the stop's 2 s for the threads: nothing was busy to give up on.
        let server = try await ServerProcess.started(["--max-sleep-ms", "60000"])
        defer { server.stop() }
        let c = server.client
        // Both threads first, then both sleeps back to back: the sleeps begin as close to the
        // SIGTERM as the machine allows (under ThreadSanitizer a thread takes seconds to make).
        var threads: [String] = []
        for _ in 0..<2 { threads.append(try await c.createThread(["name": "busy"])) }
        var follows: [String] = []
        for thread in threads {
            let queued = try await c.post(
                "/api/threads/\(thread)/perform", ["selector": "sleep", "args": ["ms": 60_000]])
            follows.append(try #require(queued["follow"].string, "\(queued)"))
        }
        for follow in follows { _ = try await c.poll(follow) { $0["state"] == "running" } }
        server.send(signal: SIGTERM)
        // It ends (however loaded the machine: the bound here is not a judgement of speed) …
        let status = await server.exited(timeout: ServerProcess.startTimeout)
        #expect(status == 0, "\(server.log)")
        let log = server.log
        // … and by its own clock within its bound: waiting for the handlers would take 60 s,
        // the stop gives them half of its 4 s. (The test's clock would count this process's
        // waits too: under `stress-ng --cpu 4` it once saw 9.2 s for a 2.04 s stop.)
        let took = Self.secondsBetween(log, "signal received", "runloopd stopped")
        #expect(took.map { $0 < RunLoopService.stopBound } == true, "the stop took \(took ?? -1) s: \(log)")
        // Each handler was still busy when the stop gave up on it, unless (a very slow machine)
        // its 60 s sleep ended within the stop's 2 s for the threads: then its stall's end is logged.
        let stop = log.components(separatedBy: "runloopd stopped")[0]  // what the stop itself saw
        let gaveUp = stop.components(separatedBy: "thread did not end in time").count - 1
        let returned = stop.components(separatedBy: "stall ended: the callout returned").count - 1
        #expect(gaveUp >= 1 && gaveUp + returned == 2, "\(log)")
        // The stop's line gives each step's seconds, and the store's last batch was written.
        // (An abandoned handler may still log its stall's end after it, before the process exits:
        // under ThreadSanitizer the sleeps begin seconds before the SIGTERM.)
        let last = try #require(
            log.split(separator: "\n").last { $0.hasSuffix("runloopd stopped") }.map(String.init), "\(log)")
        for step in ["threadsSeconds=", "httpSeconds=", "controlSeconds=", "storeSeconds=", "seconds="] {
            #expect(last.contains(step), "\(last)")
        }
        #expect(!log.contains("events not written"), "\(log)")
    }

    #if DEBUG
        @Test("a stop stuck on a lock that is never released still ends: the watchdog names every thread and exits 70")
        func stuckLockStopEnds() async throws {
            // The test fault (debug builds only) makes a thread take the event hub's
            // lock for good, as the freeze of issue 22 did; the stop's closeAll waits on it.
            let server = try await ServerProcess.started(environment: ["RUNLOOPD_TEST_FAULT": "stuck-lock"])
            defer { server.stop() }
            // (Any request that publishes an event would now wait forever too: a probe answers on its own.)
            #expect(try await server.client.get("/healthz").status == 200)
            server.send(signal: SIGTERM)
            // Without the watchdog the process never ends.
            let status = await server.exited(timeout: ServerProcess.startTimeout)
            let log = server.log
            #expect(status == 70, "\(log)")
            // The watchdog fires 1 s past the stop's bound, by the process's own clock
            // (its log's timestamps; the test's clock would count this process's waits).
            let bound = RunLoopService.stopBound
            let took = Self.secondsBetween(log, "signal received", "stop watchdog:")
            #expect(
                took.map { $0 >= bound && $0 < bound + 3 } == true,
                "the watchdog ended the stop after \(took ?? -1) s")
            #expect(log.contains("stop watchdog: the stop did not end within its"), "\(log)")
            // Every thread is listed with its state and wait: the stuck holder and the waiting main thread.
            #expect(log.contains("rl-fault state="), "\(log)")
            #expect(log.contains("syscall=futex") || log.contains("wchan=futex"), "\(log)")
        }
    #endif

    @Test("the access log loses no line on a clean stop (lines are written by the log writer in batches)")
    func accessLogIsComplete() async throws {
        // Default flags: the access log at info, text format.
        let server = try await ServerProcess.started()
        defer { server.stop() }
        let c = server.client
        let count = 300
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for i in stride(from: worker, to: count, by: 4) {
                        _ = try? await c.send("GET", "/api/version", headers: [("X-Request-Id", "log-\(i)")])
                    }
                }
            }
        }
        server.send(signal: SIGTERM)
        #expect(await server.exited(timeout: ServerProcess.startTimeout) == 0, "\(server.log)")
        let lines = server.log.split(separator: "\n").filter { $0.contains("GET /api/version 200") }
        #expect(lines.count == count, "\(lines.count) access-log lines for \(count) requests")
        for i in [0, count / 2, count - 1] {
            #expect(lines.contains { $0.contains("requestId=log-\(i) ") }, "log-\(i) is logged")
        }
        // The writer formats each line as bytes by hand: every field in its place.
        let shape = try NSRegularExpression(
            pattern: #"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) info runloopd : durationMs=\d+\.\d{1,3} "#
                + #"remote=127\.0\.0\.1 requestId=log-\d+ route=/api/version status=200 \[RunLoopServer\] "#
                + #"GET /api/version 200$"#)
        for line in lines.map(String.init) {
            let range = NSRange(line.startIndex..., in: line)
            let match = try #require(shape.firstMatch(in: line, range: range), "access line: \(line)")
            let stamp = String(line[Range(match.range(at: 1), in: line)!])
            let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
            let at = try #require(try? format.parse(stamp), "timestamp \(stamp)")
            #expect(abs(at.timeIntervalSinceNow) < 300, "timestamp \(stamp)")
        }
        #expect(server.log.hasSuffix("runloopd stopped\n"), "the last line is the stop")
    }
}

extension E2EServiceTests {
    /// Seconds between the first log line containing `from` and the first
    /// after it containing `to`, by their own timestamps (the server's clock).
    static func secondsBetween(_ log: String, _ from: String, _ to: String) -> Double? {
        let lines = log.split(separator: "\n")
        guard let start = lines.firstIndex(where: { $0.contains(from) }),
            let end = lines[start...].firstIndex(where: { $0.contains(to) }),
            let a = lines[start].split(separator: " ").first.flatMap({ Timestamp.parse(String($0)) }),
            let b = lines[end].split(separator: " ").first.flatMap({ Timestamp.parse(String($0)) })
        else { return nil }
        return b.timeIntervalSince(a)
    }
}
