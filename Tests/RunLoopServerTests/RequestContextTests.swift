import Testing

@testable import MicroHTTP

/// The request context's state machine, one event at a time (no server: the
/// connection pointer is never dereferenced by the machine).
@Suite("HTTP request context: one state machine, one transition function")
struct RequestContextTests {
    private static func context() -> HTTPRequestContext {
        HTTPRequestContext(connection: MHDConnection(pointer: OpaquePointer(bitPattern: 0x10)!), peer: nil)
    }

    @Test("an answer given inside the handler is queued at once; a second answer is ignored")
    func answeredInline() {
        let context = Self.context()
        guard case .handle(let body) = context.transition(.access) else {
            Issue.record("a whole request is handed to the handler")
            return
        }
        #expect(body.isEmpty)
        guard case .none = context.transition(.deliver(HTTPResponse(status: 200))) else {
            Issue.record("an answer during the handler is only stored")
            return
        }
        guard case .queue(let response) = context.transition(.handlerReturned) else {
            Issue.record("the stored answer is queued when the handler returns")
            return
        }
        #expect(response.status == 200)
        guard case .ignored = context.transition(.deliver(HTTPResponse(status: 500))) else {
            Issue.record("a second answer is ignored")
            return
        }
    }

    @Test("a later answer resumes the suspended connection, and the next access call queues it")
    func answeredLater() {
        let context = Self.context()
        _ = context.transition(.access)
        guard case .suspend = context.transition(.handlerReturned) else {
            Issue.record("no answer yet: suspend")
            return
        }
        guard case .none = context.transition(.suspended) else {
            Issue.record("nothing to resume yet")
            return
        }
        guard case .none = context.transition(.access) else {
            Issue.record("a spurious access call while suspended does nothing")
            return
        }
        guard case .resume = context.transition(.deliver(HTTPResponse(status: 201))) else {
            Issue.record("an answer resumes a suspended connection")
            return
        }
        guard case .queue(let response) = context.transition(.access) else {
            Issue.record("the access call after the resume queues the answer")
            return
        }
        #expect(response.status == 201)
    }

    @Test("an answer between the handler's return and the suspension: the suspender resumes at once")
    func answeredWhileSuspending() {
        let context = Self.context()
        _ = context.transition(.access)
        _ = context.transition(.handlerReturned)
        guard case .none = context.transition(.deliver(HTTPResponse(status: 204))) else {
            Issue.record("not suspended yet: the answer is stored")
            return
        }
        guard case .resume = context.transition(.suspended) else {
            Issue.record("the suspender finds the answer and resumes")
            return
        }
        guard case .queue(let response) = context.transition(.access) else {
            Issue.record("then the answer is queued")
            return
        }
        #expect(response.status == 204)
    }

    @Test("a body over the limit is dropped and counted, then refused 413; answers after the end are ignored")
    func bodyOverLimit() {
        let context = Self.context()
        let bytes: [UInt8] = Array(repeating: 0x61, count: 6)
        bytes.withUnsafeBytes { chunk in
            guard case .none = context.transition(.chunk(chunk, limit: 10)) else {
                Issue.record("within the limit the chunk is kept")
                return
            }
            guard case .dropped(let dropped) = context.transition(.chunk(chunk, limit: 10)) else {
                Issue.record("past the limit the body is dropped")
                return
            }
            #expect(dropped == 12)
        }
        guard case .refuseTooLarge = context.transition(.access) else {
            Issue.record("the whole request is refused 413")
            return
        }
        _ = context.transition(.finished)
        guard case .ignored = context.transition(.deliver(HTTPResponse(status: 200))) else {
            Issue.record("nothing may answer a finished request")
            return
        }
    }
}
