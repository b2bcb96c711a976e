import Testing

@testable import MicroHTTP

/// The request context's state machine, one event at a time (no server: the
/// connection pointer is never dereferenced by the machine).
@Suite("HTTP request context: one state machine, one transition function")
struct RequestContextTests {
    private static func context() -> HTTPRequestContext {
        HTTPRequestContext(connection: MHDConnection(pointer: OpaquePointer(bitPattern: 0x10)!), peer: nil)
    }

    /// The action's name and, for a queued answer, its status.
    private static func outcome(_ action: HTTPRequestContext.Action) -> String {
        switch action {
        case .none: "none"
        case .dropped(let count): "dropped \(count)"
        case .refuseTooLarge: "refuseTooLarge"
        case .handle(let body, _, _): "handle \(body.count)"
        case .queue(let response): "queue \(response.status)"
        case .suspend: "suspend"
        case .resume: "resume"
        case .ignored: "ignored"
        case .uncharge(let bytes): "uncharge \(bytes)"
        }
    }

    /// Runs `events` in order and returns what each transition answered.
    private static func run(_ context: HTTPRequestContext, _ events: [HTTPRequestContext.Event]) -> [String] {
        events.map { outcome(context.transition($0)) }
    }

    @Test("an answer given inside the handler is queued at once; a second answer is ignored")
    func answeredInline() {
        let steps = Self.run(
            Self.context(),
            [.access, .deliver(HTTPResponse(status: 200)), .handlerReturned, .deliver(HTTPResponse(status: 500))])
        #expect(steps == ["handle 0", "none", "queue 200", "ignored"])
    }

    @Test("an answer's held bytes are given back once, when the request ends, and not for an uncharged one")
    func heldAnswerBytesGivenBack() {
        let charged = Self.run(
            Self.context(),
            [.access, .deliver(HTTPResponse(status: 200)), .handlerReturned, .charged(70_000), .finished, .finished])
        #expect(charged == ["handle 0", "none", "queue 200", "none", "uncharge 70000", "none"])
        let small = Self.run(
            Self.context(), [.access, .deliver(HTTPResponse(status: 200)), .handlerReturned, .finished])
        #expect(small == ["handle 0", "none", "queue 200", "none"])
    }

    @Test("a later answer resumes the suspended connection, and the next access call queues it")
    func answeredLater() {
        let steps = Self.run(
            Self.context(),
            [.access, .handlerReturned, .suspended, .access, .deliver(HTTPResponse(status: 201)), .access, .access])
        #expect(steps == ["handle 0", "suspend", "none", "none", "resume", "queue 201", "none"])
    }

    @Test("an answer between the handler's return and the suspension: the suspender resumes at once")
    func answeredWhileSuspending() {
        let steps = Self.run(
            Self.context(), [.access, .handlerReturned, .deliver(HTTPResponse(status: 204)), .suspended, .access])
        #expect(steps == ["handle 0", "suspend", "none", "resume", "queue 204"])
    }

    @Test("a body over the limit is dropped and counted, then refused 413; answers after the end are ignored")
    func bodyOverLimit() {
        let context = Self.context()
        let bytes: [UInt8] = Array(repeating: 0x61, count: 6)
        let read = bytes.withUnsafeBytes { chunk in
            Self.run(context, [.chunk(chunk, limit: 10), .chunk(chunk, limit: 10)])
        }
        #expect(read == ["none", "dropped 12"])
        let rest = Self.run(context, [.access, .finished, .deliver(HTTPResponse(status: 200))])
        #expect(rest == ["refuseTooLarge", "none", "ignored"])
    }

    @Test("a body within the limit reaches the handler whole")
    func bodyWithinLimit() {
        let context = Self.context()
        let bytes: [UInt8] = Array("{\"a\":1}".utf8)
        let read = bytes.withUnsafeBytes { chunk in Self.run(context, [.chunk(chunk, limit: 10)]) }
        #expect(read == ["none"])
        guard case .handle(let body, _, _) = context.transition(.access) else {
            Issue.record("the whole request goes to the handler")
            return
        }
        #expect(body == bytes)
    }

    /// The head read at the first access call waits in the context and goes
    /// to the handler with the body, once.
    @Test func headGoesToTheHandlerWithTheBody() {
        let context = HTTPRequestContext(
            connection: MHDConnection(pointer: OpaquePointer(bitPattern: 0x10)!), peer: nil,
            headers: ["Host": "127.0.0.1:8080", "Accept": "*/*"], headerCount: 3)
        guard case .handle(_, let headers, let count) = context.transition(.access) else {
            Issue.record("the whole request goes to the handler")
            return
        }
        #expect(headers["host"] == "127.0.0.1:8080" && headers["Accept"] == "*/*" && count == 3)
        #expect(Self.outcome(context.transition(.access)) == "none")
    }
}
