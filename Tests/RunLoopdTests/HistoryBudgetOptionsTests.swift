import ArgumentParser
import Foundation
import RunLoopServer
import RunLoopStore
import Testing

@testable import runloopd

/// The history's byte budgets at start (issue 37 finding 5, issue 40 item 2):
/// a `--retention-size` below the floor an empty store sets is refused with
/// the numbers; the queue's and an event's byte bounds are checked.
@Suite("runloopd serve: the history's byte budgets")
struct HistoryBudgetOptionsTests {
    @Test("the floor is an empty store's measured size and as much again of events, at 60 % of the limit")
    func floorIsMeasured() throws {
        let (floor, empty) = try #require(StoreOptions.retentionFloor())
        // An empty store is its schema's pages (16 KiB each), one instance row in them.
        #expect(empty >= 100_000 && empty <= 1_000_000, "empty store \(empty) bytes")
        #expect(empty % 16_384 == 0)
        #expect(Double(floor) * 0.6 >= Double(2 * empty), "floor \(floor), empty \(empty)")
    }

    @Test("--retention-size below the floor is refused, with the floor and the empty store's size in the message")
    func belowTheFloorIsRefused() throws {
        let (floor, empty) = try #require(StoreOptions.retentionFloor())
        for (arguments, environment) in [
            (["--retention-size", "300KB"], [String: String]()),
            (["--retention-size", "\(floor - 1)"], [:]),
            ([], ["RUNLOOPD_RETENTION_SIZE": "2KB"]),
        ] {
            let refused = try #require(refusal(arguments, environment: environment), "\(arguments) \(environment)")
            #expect(refused.exitCode == ExitCode.validationFailure.rawValue)
            #expect(refused.message.contains("--retention-size must be 0 (no size limit) or at least \(floor) bytes"))
            #expect(refused.message.contains("an empty store measures \(empty) bytes"), "\(refused.message)")
            if !environment.isEmpty { #expect(refused.message.contains("RUNLOOPD_RETENTION_SIZE=2KB")) }
        }
        // At the floor, no size bound, or no store at all: accepted.
        for arguments in [
            ["--retention-size", "\(floor)"], ["--retention-size", "0"], ["--no-store", "--retention-size", "1KB"],
        ] {
            #expect(refusal(arguments) == nil, "\(arguments)")
        }
        let serve = try parseServe(["--retention-size", "\(floor)"])
        #expect(serve.history.options.retention.maxBytes == floor)
    }

    @Test("the queue's and an event's byte bounds: defaults, flags, ranges")
    func queueAndEventBytes() throws {
        let defaults = try parseServe([]).history.options
        #expect(defaults.queueBytes == 16_000_000 && defaults.eventBytes == 8_192)
        let set = try parseServe(["--store-queue-bytes", "1MB", "--store-event-bytes", "2KiB"]).history.options
        #expect(set.queueBytes == 1_000_000 && set.eventBytes == 2_048)
        let fromVariables = try parseServe(
            [], environment: ["RUNLOOPD_STORE_QUEUE_BYTES": "2MB", "RUNLOOPD_STORE_EVENT_BYTES": "4096"]
        ).history.options
        #expect(fromVariables.queueBytes == 2_000_000 && fromVariables.eventBytes == 4_096)
        for (arguments, says) in [
            (["--store-event-bytes", "100"], "--store-event-bytes must be 1024...2147483647 bytes"),
            (["--store-queue-bytes", "1KB"], "--store-queue-bytes must be 64KiB...1TiB"),
        ] {
            let refused = try #require(refusal(arguments))
            #expect(refused.exitCode == ExitCode.validationFailure.rawValue)
            #expect(refused.message.contains(says), "\(refused.message)")
        }
        // A transaction's bytes: a thirty-second of the size bound, 64 KiB at least, the queue's bound at most.
        #expect(defaults.batchBytes == 8_000_000)
        var small = defaults
        small.retention.maxBytes = 1_000_000
        #expect(small.batchBytes == 64 << 10)
        small.retention.maxBytes = nil
        #expect(small.batchBytes == 16_000_000)
    }
}
