import Foundation
import RunLoopTestSupport

/// Running wrk (`-t1`, its `--latency` percentiles) and reading its report.
extension HopBenchmark {
    struct WrkResult {
        var rps: Double
        var p50: Double
        var p75: Double = .nan
        var p90: Double = .nan
        var p99: Double
        var errors: Int
        var requests: Int
    }

    static func wrk(port: UInt16, path: String, seconds: Int, script: String?, connections: Int = 16) -> WrkResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/wrk")
        var args = ["-t1", "-c\(connections)", "-d\(seconds)s", "--latency"]
        if let script { args += ["-s", script] }
        args.append("http://127.0.0.1:\(port)\(path)")
        process.arguments = args
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { fatalError("cannot run wrk: \(error)") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return parse(String(decoding: data, as: UTF8.self))
    }

    static func parse(_ text: String) -> WrkResult {
        var result = WrkResult(rps: .nan, p50: .nan, p99: .nan, errors: 0, requests: 0)
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if line.hasPrefix("Requests/sec:"), parts.count > 1 { result.rps = Double(parts[1]) ?? .nan }
            if line.hasPrefix("50%"), parts.count > 1 { result.p50 = seconds(String(parts[1])) }
            if line.hasPrefix("75%"), parts.count > 1 { result.p75 = seconds(String(parts[1])) }
            if line.hasPrefix("90%"), parts.count > 1 { result.p90 = seconds(String(parts[1])) }
            if line.hasPrefix("99%"), parts.count > 1 { result.p99 = seconds(String(parts[1])) }
            if line.hasPrefix("Non-2xx"), let last = parts.last { result.errors += Int(last) ?? 0 }
            if line.hasPrefix("Socket errors") { result.errors += 1 }
            if line.contains("requests in"), let first = parts.first { result.requests = Int(first) ?? 0 }
        }
        return result
    }

    static func seconds(_ text: String) -> Double {
        let units: [(String, Double)] = [("us", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            return (Double(text.dropLast(suffix.count)) ?? .nan) * scale
        }
        return .nan
    }
}
