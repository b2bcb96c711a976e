import RunLoopCore
import Testing

/// `WorkerRegistry.page`: the paged thread list's engine side.
@Suite struct RegistryPageTests {
    @Test("a page after a cursor with no limit (Int.max) is every later thread, not an overflow")
    func unlimitedPageAfterACursor() throws {
        let (registry, _) = makeRegistry()
        defer { registry.endAll() }
        let made = try (0..<3).map { _ in try registry.createWorker(options(.manual)).id }
        let page = registry.page(after: made[0], limit: .max)
        #expect(page.workers.map(\.id) == Array(made.dropFirst()))
        #expect(page.total == 3 && !page.more)
        let one = registry.page(after: made[0], limit: 1)
        #expect(one.workers.map(\.id) == [made[1]] && one.more)
        #expect(registry.page(after: made[2], limit: .max).workers.isEmpty)
    }
}
