import Foundation
import Logging
import RunLoopCore
import Testing

@testable import RunLoopServer

/// Ownership: nothing the service starts (control loop, HTTP server, event
/// hub, registry, workers) keeps the service alive once it has stopped.
@Suite("Service lifecycle")
struct ServiceLifecycleTests {
    @Test("the service deinitialises after stop, having served requests and run workers")
    func serviceDeinitialisesAfterStop() throws {
        weak var released: RunLoopService?
        weak var releasedRegistry: WorkerRegistry?
        try {
            var configuration = ServiceConfiguration()
            configuration.http.host = "127.0.0.1"
            configuration.http.port = 0
            let service = RunLoopService(configuration: configuration, logger: Logger(label: "lifecycle-test"))
            try service.start()
            let base = "http://127.0.0.1:\(service.port)"
            // Through the control loop: a thread, a waited perform, the listing.
            let created = try Curl.run([
                "-X", "POST", "-H", "Content-Type: application/json", "-d", #"{"name":"lifecycle"}"#,
                "\(base)/api/threads",
            ])
            #expect(created.status == 201)
            let performed = try Curl.run([
                "-X", "POST", "-H", "Content-Type: application/json",
                "-d", #"{"selector":"echo","args":{"x":1},"waitUntilDone":true}"#, "\(base)/api/threads/t1/perform",
            ])
            #expect(performed.status == 200)
            #expect(try Curl.run(["\(base)/api/threads"]).status == 200)
            #expect(try Curl.run(["\(base)/healthz"]).status == 200)
            service.stop()
            released = service
            releasedRegistry = service.registry
        }()
        #expect(released == nil, "something the service started still holds it")
        #expect(releasedRegistry == nil, "something still holds the registry")
    }
}
