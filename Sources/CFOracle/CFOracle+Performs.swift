import CoreFoundation
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Performs as runloopd documents them: one carrier source per mode name.
extension Player {
    // MARK: - Performs

    /// Queues a perform for `keys` (any thread): each key's carrier is added
    /// to its mode if it is not there, signalled if it is not, the loop woken.
    func queuePerform(_ label: String, keys: [String], action: OracleSetup.Action?) {
        guard let loop else { return }
        let (adds, signals) = locked { s -> ([(CFRunLoopSource, String)], [CFRunLoopSource]) in
            s.lastSeq += 1
            s.pending.append(Pending(seq: s.lastSeq, label: label, keys: keys, action: action))
            var adds: [(CFRunLoopSource, String)] = []
            var signals: [CFRunLoopSource] = []
            for key in keys {
                guard var carrier = s.carriers[key] else { continue }
                if !carrier.inLoop {
                    carrier.inLoop = true
                    carrier.signalled = true
                    adds.append((carrier.source, key))
                } else if !carrier.signalled {
                    carrier.signalled = true
                    signals.append(carrier.source)
                }
                s.carriers[key] = carrier
            }
            return (adds, signals)
        }
        for (source, key) in adds {
            CFRunLoopAddSource(loop, source, cfMode(key))
            CFRunLoopSourceSignal(source)
            CFRunLoopWakeUp(loop)
        }
        for source in signals { CFRunLoopSourceSignal(source) }
        if !signals.isEmpty { CFRunLoopWakeUp(loop) }
    }

    /// Queues a block perform for `keys` (any thread), as Foundation's
    /// `RunLoop.perform(inModes:block:)` does: `CFRunLoopPerformBlock` with
    /// the mode name (one key) or an array of them (CF keeps it as a set:
    /// the block runs once), then `CFRunLoopWakeUp` (runloopd wakes the loop
    /// after queueing a block; Foundation leaves it to the caller). CF runs it
    /// in `__CFRunLoopDoBlocks`; it is never a handled source.
    func queueBlock(_ label: String, keys: [String], action: OracleSetup.Action?) {
        guard let loop else { return }
        let block: () -> Void = { [self] in
            callout("perform \(label)", source: false) { act(action, label: "perform \(label)") }
        }
        let names = keys.map(cfMode)
        if names.count == 1 {
            CFRunLoopPerformBlock(loop, names[0], block)
        } else {
            var values: [UnsafeRawPointer?] = names.map { UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque()) }
            var callbacks = kCFTypeArrayCallBacks
            let array = withExtendedLifetime(names) { CFArrayCreate(nil, &values, values.count, &callbacks) }
            CFRunLoopPerformBlock(loop, array, block)
        }
        CFRunLoopWakeUp(loop)
    }

    /// The carrier's perform routine for `key` (the loop's thread).
    func carrierRoutine(_ key: String) {
        let bound = locked { s in
            s.carriers[key]?.signalled = false
            return s.lastSeq
        }
        while let next = locked({ s -> Pending? in
            guard let index = s.pending.firstIndex(where: { $0.seq <= bound && $0.keys.contains(key) }) else {
                return nil
            }
            return s.pending.remove(at: index)
        }) {
            retire(next.keys.filter { $0 != key })
            callout("perform \(next.label)", source: true) { act(next.action, label: "perform \(next.label)") }
        }
        retire([key])
    }

    /// Takes out of its mode each of `keys`' carriers no pending perform needs.
    func retire(_ keys: [String]) {
        guard let loop else { return }
        let gone = locked { s -> [(CFRunLoopSource, String)] in
            var gone: [(CFRunLoopSource, String)] = []
            for key in keys {
                guard var carrier = s.carriers[key], carrier.inLoop,
                    !s.pending.contains(where: { $0.keys.contains(key) })
                else { continue }
                carrier.inLoop = false
                carrier.signalled = false
                s.carriers[key] = carrier
                gone.append((carrier.source, key))
            }
            return gone
        }
        for (source, key) in gone { CFRunLoopRemoveSource(loop, source, cfMode(key)) }
    }
}
