import CoreFoundation
import Foundation

/// Block performs (`CFRunLoopPerformBlock`, what Foundation's
/// `RunLoop.perform(inModes:block:)` calls): queued from any thread, run by
/// CF on the worker's thread in `__CFRunLoopDoBlocks`.
extension Worker {
    /// Hands `request` to CF as a block for its modes (one mode: its name,
    /// `common` as `kCFRunLoopCommonModes`; several: an array of them, which
    /// CF keeps as a set, so the block runs once, in whichever of them runs
    /// first), then wakes the loop: CF itself does not.
    func performBlock(_ request: PerformRequest) throws(RunLoopError) {
        let (loop, placement) = try book.withLock { b throws(RunLoopError) in
            try admitPerform(in: b)
            for mode in request.modes { b.filled(mode.name) }
            let placement = b.placement(of: request.modes)
            if b.loop != nil {
                b.performs.addBlock(request)
                // The block is in CF's list: a parked worker may run now.
                b.touch()
            }
            return (b.loop, placement)
        }
        if let loop {
            let names = request.modes.map(\.cfMode)
            let block: () -> Void = { [weak self, request] in self?.blockRan(request) }
            if names.count == 1 {
                CFRunLoopPerformBlock(loop, names[0], block)
            } else {
                var values: [UnsafeRawPointer?] = names.map {
                    UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque())
                }
                var callbacks = kCFTypeArrayCallBacks
                let array = withExtendedLifetime(names) { CFArrayCreate(nil, &values, values.count, &callbacks) }
                CFRunLoopPerformBlock(loop, array, block)
            }
            CFRunLoopWakeUp(loop)
        }
        book.notifyAll()
        for mode in request.modes { noteMode(mode) }
        unwarn(.emptyModeAsleep)
        if placement != .runningInMode { watchPerform(request, idle: placement == .idle) }
    }

    /// CF ran the block (on this thread, inside `__CFRunLoopDoBlocks`): the
    /// perform runs now unless the worker ended first.
    private func blockRan(_ request: PerformRequest) {
        let taken = book.withLock { b in
            guard b.performs.takeBlock(request) else { return false }
            // Recorded before the callout: a run that finds the mode empty
            // after it knows what emptied it.
            for mode in request.modes {
                b.removed("perform", request.id, how: PerformVia.ranHow, from: mode.name)
            }
            return true
        }
        guard taken else { return }
        execute(request)
    }
}
