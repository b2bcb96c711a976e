import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// `RequestKind.isPredict`, read byte by byte in place (issue 41: it is asked
/// of every POST and DELETE), against the rule it states: the path split at
/// every `/` is `""`, `api`, `threads`, a non-empty id, `predict`. A fresh
/// seed each run (`REQUEST_KIND_SEED=s` replays one).
@Suite("Request kind")
struct RequestKindTests {
    static func model(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 5 && parts[0].isEmpty && parts[1] == "api" && parts[2] == "threads"
            && !parts[3].isEmpty && parts[4] == "predict"
    }

    @Test(
        "the predict route and its near misses",
        arguments: [
            ("/api/threads/t1/predict", true), ("/api/threads/x/predict", true),
            ("/api/threads/é/predict", true), ("/api/threads//predict", false),
            ("/api/threads/predict", false), ("/api/threads/t1/predict/", false),
            ("/api/threads/a/b/predict", false), ("api/threads/t1/predict", false),
            ("/api/threads/t1/predictx", false), ("/api/threads/t1/Predict", false),
            ("//api/threads/t1/predict", false), ("/api/thread/t1/predict", false),
            ("/api/threads/t1/perform", false), ("", false), ("/", false),
        ])
    func examples(path: String, expected: Bool) {
        #expect(RequestKind.isPredict(path) == expected)
        #expect(Self.model(path) == expected)
        #expect(RequestKind.changesState(method: "POST", path: path) == !expected)
        #expect(RequestKind.changesState(method: "DELETE", path: path))
        #expect(!RequestKind.changesState(method: "GET", path: path))
    }

    /// Paths built from the route's own pieces, shuffled, cut and doubled,
    /// so that near misses are common.
    @Test("random paths agree with the rule")
    func randomized() {
        let seed = SplitMix.seed("REQUEST_KIND_SEED", test: "RequestKindTests.randomized")
        var random = SplitMix(seed)
        let pieces = ["/", "api", "threads", "predict", "t1", "é", "", "//", "p", "x/"]
        var agreed = 0
        var predicts = 0
        for _ in 0..<20_000 {
            var path = ""
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                path += pieces[Int.random(in: 0..<pieces.count, using: &random)]
            }
            if random.next() % 3 == 0 { path = "/api/threads/" + path + "/predict" }
            let expected = Self.model(path)
            #expect(RequestKind.isPredict(path) == expected, "seed \(seed): \(path)")
            if RequestKind.isPredict(path) == expected { agreed += 1 }
            if expected { predicts += 1 }
        }
        // The generator reaches both answers.
        #expect(agreed == 20_000 && predicts > 100)
    }
}
