import Foundation
import Primitives
import RunLoopCore

/// The lab: experiment files and the journal of answered requests. Run on the
/// control loop; a journal export is built on the exports queue (`API.offload`).
extension API {
    func addLab(_ r: inout Router) {
        r.add(.get, "/api/experiments") { _ throws(RunLoopError) in
            .json(200, ["experiments": .array(experiments.experiments.map(\.summary))])
        }
        r.add(.get, "/api/experiments/{eid}") { ctx throws(RunLoopError) in
            let wanted = try ctx.param("eid")
            guard let experiment = experiments.experiments.first(where: { $0.id == wanted }) else {
                throw .notFound("experiment", wanted)
            }
            return .json(200, experiment.document)
        }
        r.add(.get, "/api/journal") { ctx throws(RunLoopError) in
            let since = Int(clamping: try API.sinceParameter(ctx, what: "a journal seq") ?? 0)
            let limit = try API.integerParameter(ctx, "limit", in: 1...10_000) ?? 1000
            var maxWait = Journal.defaultMaxWait
            if let text = ctx.request.query["maxWait"] {
                guard let value = Double(text), value.isFinite, (0...60).contains(value) else {
                    throw .badValue("maxWait", "maxWait must be seconds in 0...60")
                }
                maxWait = value
            }
            // Built on the exports queue: a page parses up to
            // --max-export-bytes, 145-357 ms under the fuzzer and one CPU hog.
            let versionText = version.object?["version"]?.string ?? ""
            return offload(ctx, on: exports) { [journal, maxWait] in
                let newest = journal.newestSeq
                let page = journal.entries(since: since, limit: limit)
                return Journal.experiment(
                    page.entries, version: versionText, maxWait: maxWait, newestSeq: newest, missed: page.missed)
            }
        }
    }
}
