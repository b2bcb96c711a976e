import Foundation

/// Line charts as self-contained SVG (no scripts, no fonts to fetch), for the
/// figures people would rather look at than read: latency distributions and
/// scale curves. BENCHMARKS.md links them from `benchmarks/charts/`.
enum SVGChart {
    struct Series {
        var name: String
        var points: [(x: Double, y: Double)]
    }

    static let palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]

    /// A line chart of `series`; `logX` / `logY` use base-10 log axes.
    static func line(
        title: String, xLabel: String, yLabel: String, series: [Series], logX: Bool = false, logY: Bool = false,
        xTicks: [Double]? = nil
    ) -> String {
        let width = 720.0
        let height = 420.0
        let left = 70.0
        let right = 180.0
        let top = 40.0
        let bottom = 50.0
        let plotW = width - left - right
        let plotH = height - top - bottom
        let all = series.flatMap(\.points).filter {
            $0.x.isFinite && $0.y.isFinite && (!logX || $0.x > 0) && (!logY || $0.y > 0)
        }
        guard !all.isEmpty else { return "<svg xmlns=\"http://www.w3.org/2000/svg\"/>" }
        func t(_ v: Double, _ log: Bool) -> Double { log ? log10(v) : v }
        var xMin = all.map { t($0.x, logX) }.min()!
        var xMax = all.map { t($0.x, logX) }.max()!
        var yMin = logY ? all.map { t($0.y, true) }.min()! : 0
        var yMax = all.map { t($0.y, logY) }.max()!
        if xMax == xMin { xMax = xMin + 1 }
        if yMax == yMin { yMax = yMin + 1 }
        if !logY { yMax *= 1.08 } else { yMin = floor(yMin); yMax = ceil(yMax) }
        if logX { xMin = floor(xMin); xMax = ceil(xMax) }
        func px(_ x: Double) -> Double { left + (t(x, logX) - xMin) / (xMax - xMin) * plotW }
        func py(_ y: Double) -> Double { top + plotH - (t(y, logY) - yMin) / (yMax - yMin) * plotH }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="22" font-size="15" font-weight="bold">\(escape(title))</text>

            """
        // Grid and ticks.
        let yTicks: [Double] =
            logY
            ? stride(from: yMin, through: yMax, by: 1).map { pow(10, $0) }
            : (0...5).map { yMin + (yMax - yMin) * Double($0) / 5 }
        for value in yTicks {
            let y = py(value)
            svg += "<line x1=\"\(left)\" y1=\"\(r(y))\" x2=\"\(left + plotW)\" y2=\"\(r(y))\" stroke=\"#e5e5e5\"/>\n"
            svg += "<text x=\"\(left - 6)\" y=\"\(r(y + 4))\" text-anchor=\"end\">\(label(value))</text>\n"
        }
        let defaultXs: [Double] =
            logX
            ? stride(from: xMin, through: xMax, by: 1).map { pow(10, $0) }
            : (0...5).map { xMin + (xMax - xMin) * Double($0) / 5 }
        let xs: [Double] = xTicks ?? defaultXs
        for value in xs {
            let x = px(value)
            svg += "<line x1=\"\(r(x))\" y1=\"\(top)\" x2=\"\(r(x))\" y2=\"\(top + plotH)\" stroke=\"#f0f0f0\"/>\n"
            svg += "<text x=\"\(r(x))\" y=\"\(top + plotH + 16)\" text-anchor=\"middle\">\(label(value))</text>\n"
        }
        svg +=
            "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(plotW)\" height=\"\(plotH)\" fill=\"none\" stroke=\"#888\"/>\n"
        svg +=
            "<text x=\"\(left + plotW / 2)\" y=\"\(height - 10)\" text-anchor=\"middle\">\(escape(xLabel))</text>\n"
        svg +=
            "<text transform=\"translate(16 \(top + plotH / 2)) rotate(-90)\" text-anchor=\"middle\">\(escape(yLabel))</text>\n"
        // Series and legend.
        for (index, s) in series.enumerated() {
            let color = palette[index % palette.count]
            let pts = s.points.filter { $0.x.isFinite && $0.y.isFinite && (!logX || $0.x > 0) && (!logY || $0.y > 0) }
            let path = pts.map { "\(r(px($0.x))),\(r(py($0.y)))" }.joined(separator: " ")
            svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
            for p in pts { svg += "<circle cx=\"\(r(px(p.x)))\" cy=\"\(r(py(p.y)))\" r=\"2.5\" fill=\"\(color)\"/>\n" }
            let ly = top + 10 + Double(index) * 20
            svg +=
                "<line x1=\"\(left + plotW + 12)\" y1=\"\(ly)\" x2=\"\(left + plotW + 32)\" y2=\"\(ly)\" stroke=\"\(color)\" stroke-width=\"3\"/>\n"
            svg += "<text x=\"\(left + plotW + 38)\" y=\"\(ly + 4)\">\(escape(s.name))</text>\n"
        }
        return svg + "</svg>\n"
    }

    /// Writes `svg` to `path` (creating its folder).
    static func write(_ svg: String, to path: String) {
        let url = URL(fileURLWithPath: path)
        try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? Data(svg.utf8).write(to: url)
    }

    private static func r(_ v: Double) -> String { String(format: "%.1f", v) }

    private static func label(_ v: Double) -> String {
        if v == 0 { return "0" }
        if abs(v) >= 1000 { return String(format: "%.0fk", v / 1000).replacingOccurrences(of: ".0k", with: "k") }
        if abs(v) >= 10 { return String(format: "%.0f", v) }
        if abs(v) >= 1 { return String(format: "%.1f", v) }
        return String(format: "%.2g", v)
    }

    private static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}
