import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// `/metrics` by the Prometheus conventions, against the real binary: HELP
/// and TYPE for every family, one order, counters present at 0, units in the
/// names, build and process metrics, one set of latency buckets, the store's
/// and the fleet's figures.
@Suite("E2E metrics")
struct E2EMetricsTests {
    /// One scrape, parsed: families in order with their type and help, and
    /// every sample by its full series name (`name{labels}`).
    struct Scrape {
        var families: [String] = []
        var types: [String: String] = [:]
        var help: [String: String] = [:]
        var samples: [String: Double] = [:]
        /// Sample lines whose family had no `# TYPE` before them.
        var orphans: [String] = []

        init(_ text: String) {
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
                if parts.count >= 4, parts[0] == "#", parts[1] == "HELP" {
                    help[parts[2]] = parts[3]
                } else if parts.count == 4, parts[0] == "#", parts[1] == "TYPE" {
                    families.append(parts[2])
                    types[parts[2]] = parts[3]
                } else if let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) {
                    let series = String(line[..<space])
                    let name = String(series.prefix { $0 != "{" })
                    samples[series] = value
                    let family = families.last ?? ""
                    let ok =
                        name == family
                        || (types[family] == "histogram"
                            && ["_bucket", "_sum", "_count"].contains { name == family + $0 })
                    if !ok { orphans.append(series) }
                }
            }
        }

        /// The `le` bounds of one histogram series, in order.
        func bounds(_ family: String) -> [String] {
            samples.keys.filter { $0.hasPrefix(family + "_bucket") }.compactMap { series -> String? in
                guard let range = series.range(of: "le=\"") else { return nil }
                return String(series[range.upperBound...].prefix { $0 != "\"" })
            }
        }
    }

    static func scrape(_ c: E2EClient) async throws -> Scrape {
        let response = try await c.get("/metrics")
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
        return Scrape(response.text)
    }

    @Test("every family has HELP and TYPE, the order holds between scrapes, counters start at 0")
    func conventions() async throws {
        try await withTemporaryPath("metrics") { dir in
            try await ServerProcess.with(["--data-dir", dir.path, "--max-threads", "1"]) { server in
                let c = server.client
                let first = try await Self.scrape(c)
                #expect(first.orphans.isEmpty, "samples outside their family: \(first.orphans)")
                for family in first.families {
                    #expect(!(first.help[family] ?? "").isEmpty, "no HELP for \(family)")
                    #expect(["counter", "gauge", "histogram"].contains(first.types[family] ?? ""), "\(family)")
                    if first.types[family] == "counter" { #expect(family.hasSuffix("_total"), "\(family)") }
                }
                // Present from the start at 0: every known limit, stall, perform and exit label.
                for reason in ["too_many_threads", "too_many_timers", "queue_full", "too_many_clients", "overloaded"] {
                    #expect(first.samples["runloopd_limit_refusals_total{reason=\"\(reason)\"}"] == 0, "\(reason)")
                }
                for severity in ["micro", "hang", "severe"] {
                    #expect(first.samples["runloopd_stalls_total{severity=\"\(severity)\"}"] == 0)
                }
                #expect(first.samples["runloopd_performs_total{outcome=\"ok\"}"] == 0)
                #expect(first.samples["runloopd_store_pruned_total"] == 0)
                #expect(first.samples["runloopd_store_up"] == 1)
                // Units in names: the utilization is a ratio; the unit-less old name is gone.
                #expect(first.types["runloopd_loop_utilization_ratio"] == "gauge")
                #expect(first.types["runloopd_loop_utilization"] == nil)
                // The build, the start time and the process.
                let version = try await c.get("/api/version")["version"].string ?? "?"
                #expect(first.samples["runloopd_build_info{version=\"\(version)\",store=\"sqlite\"}"] == 1)
                let start = try #require(first.samples["runloopd_start_time_seconds"])
                let processStart = try #require(first.samples["process_start_time_seconds"])
                #expect(abs(start - Date().timeIntervalSince1970) < 600)
                #expect(abs(start - processStart) < 60)
                #expect((first.samples["process_resident_memory_bytes"] ?? 0) > 1_000_000)
                #expect(
                    (first.samples["process_virtual_memory_bytes"] ?? 0)
                        >= (first.samples["process_resident_memory_bytes"] ?? 0))
                let fds = try #require(first.samples["process_open_fds"])
                #expect(fds >= 3 && fds <= (first.samples["process_max_fds"] ?? 0))
                #expect(first.types["process_cpu_seconds_total"] == "counter")
                #expect(first.types["runloopd_fleet_instances"] == "gauge")
                // Read from the store when scraped (a first scrape may come before the answer).
                let fleet = try await c.poll("/metrics") {
                    Scrape($0.text).samples["runloopd_fleet_instances{state=\"up\"}"] != nil
                }
                #expect(Scrape(fleet.text).samples["runloopd_fleet_instances{state=\"up\"}"] == 1)
                #expect(Scrape(fleet.text).samples["runloopd_fleet_instances{state=\"lost\"}"] == 0)

                // Work that adds label sets (routes, a refusal, a histogram per route), then the same order.
                _ = try await c.createThread()
                #expect(try await c.post("/api/threads", [:]).status == 429)
                _ = try await c.get("/api/nope")
                let second = try await Self.scrape(c)
                #expect(second.families == first.families)
                #expect(second.samples["runloopd_limit_refusals_total{reason=\"too_many_threads\"}"] == 1)
                // One set of latency buckets for every histogram.
                let histograms = second.families.filter { second.types[$0] == "histogram" }
                #expect(histograms.count == 4, "\(histograms)")
                let expected = Set(ServiceMetricsBuckets.bounds + ["+Inf"])
                for family in histograms {
                    let seen = second.bounds(family)
                    #expect(!seen.isEmpty, "\(family)")
                    #expect(Set(seen) == expected, "\(family): \(Set(seen).symmetricDifference(expected))")
                }
            }
        }
    }

    @Test(
        "two instances on one PostgreSQL: runloopd_fleet_instances counts them up, then one stopped",
        .enabled(if: E2EHistoryTests.hasPostgres, "needs RUNLOOPD_TEST_POSTGRES_URL (scripts/with-postgres.sh)"))
    func fleetHealth() async throws {
        let database = try PostgresTestDatabase.create()
        defer { database.drop() }
        let a = try await ServerProcess.started(["--store", database.url, "--instance-id", "m-alpha"])
        let b = try await ServerProcess.started(["--store", database.url, "--instance-id", "m-beta"])
        defer { b.stop() }
        func waitFor(_ predicate: @escaping @Sendable (Scrape) -> Bool) async throws -> Scrape {
            Scrape(try await b.client.poll("/metrics", timeout: 20) { predicate(Scrape($0.text)) }.text)
        }
        var scrape = try await waitFor { $0.samples["runloopd_fleet_instances{state=\"up\"}"] == 2 }
        #expect(scrape.samples["runloopd_fleet_instances{state=\"up\"}"] == 2)
        #expect(scrape.samples["runloopd_build_info{version=\"\(RunLoopService.version)\",store=\"postgres\"}"] == 1)
        await a.stopped()
        scrape = try await waitFor { $0.samples["runloopd_fleet_instances{state=\"stopped\"}"] == 1 }
        #expect(scrape.samples["runloopd_fleet_instances{state=\"stopped\"}"] == 1)
        #expect(scrape.samples["runloopd_fleet_instances{state=\"up\"}"] == 1)
        #expect(scrape.samples["runloopd_fleet_instances{state=\"lost\"}"] == 0)
    }
}

/// The `le` labels the server writes for its latency buckets (10 µs to 10 s).
enum ServiceMetricsBuckets {
    static let bounds = [
        "1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
        "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
    ]
}
