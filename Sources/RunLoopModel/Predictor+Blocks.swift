/// Block performs (`CFRunLoopPerformBlock`) in the predictor: CF keeps them
/// in one list per loop, each with its modes (one name, `common`, or a set
/// of names). `__CFRunLoopModeIsEmpty` counts a block of the mode as
/// content, and `__CFRunLoopDoBlocks` runs them; `__CFRunLoopRun` calls it
/// three times a pass: after the `beforeTimers` and `beforeSources`
/// observers (before the version-0 sources), again right after the
/// version-0 sources when one was handled, and once more after the wake
/// (after the timers, the port or the wake-up were handled, before the
/// pass's exit checks). Running a block never makes the pass count as
/// having handled a source: it neither ends a `returnAfterSourceHandled`
/// run nor makes the loop poll instead of sleeping.
extension RunSimulator {
    /// Whether a block waiting in CF's list keeps `mode` from being empty.
    func blocksHold(_ mode: String) -> Bool {
        model.blocks.contains { model.expand($0.keys).contains(mode) }
    }

    /// `__CFRunLoopDoBlocks`: CF takes the whole list off the loop, runs the
    /// run mode's blocks in queue order, then puts the others back before
    /// any queued meanwhile (a block queued from a block waits for the next
    /// call; a run nested in a block sees none of the list taken off).
    mutating func doBlocks() {
        guard !model.blocks.isEmpty, stuck == nil else { return }
        let list = model.blocks
        model.blocks = []
        var kept: [LoopModel.Perform] = []
        for block in list {
            guard stuck == nil, model.expand(block.keys).contains(mode) else {
                kept.append(block)
                continue
            }
            removed("perform", block.id, how: PerformVia.ranHow, from: block.keys)
            var ref = CalloutRef(kind: .perform, id: block.id, selector: block.selector)
            ref.viaBlock = true
            callout(ref, nested: block.nested)
        }
        model.blocks = kept + model.blocks
    }
}
