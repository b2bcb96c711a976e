import CoreFoundation
import Foundation
import Primitives

/// The modes one timer or source is in: CF keeps one item in any number of
/// modes (`CFRunLoopAdd…` / `CFRunLoopRemove…` per mode). Thread-safe.
final class ItemModes: Sendable {
    private let names: Locked<[String]>

    init(_ first: String) { names = Locked([first]) }

    /// Every mode, in the order added.
    var all: [String] { names.withLock { $0 } }

    /// Whether the item is in `mode` (directly, or through `common`).
    func contains(_ mode: String, common: [String]) -> Bool {
        names.withLock { $0.contains { $0 == mode || ($0 == "common" && common.contains(mode)) } }
    }

    /// Records one more mode; false if the item was already in it.
    func add(_ mode: String) -> Bool {
        names.withLock { list in
            guard !list.contains(mode) else { return false }
            list.append(mode)
            return true
        }
    }

    /// Records leaving a mode; false if the item was not in it.
    func remove(_ mode: String) -> Bool {
        names.withLock { list in
            guard let index = list.firstIndex(of: mode) else { return false }
            list.remove(at: index)
            return true
        }
    }
}

/// A timer or source record that can be in several modes.
protocol ModeScheduled: AnyObject, Sendable {
    var modeSet: ItemModes { get }
    var isValid: Bool { get }
}

extension ModeScheduled {
    /// The modes it is in.
    var modes: [String] { modeSet.all }

    /// Whether it is in `mode` (directly, or through `common`).
    func isIn(_ mode: String, common: [String]) -> Bool { modeSet.contains(mode, common: common) }
}

extension Worker {
    /// The code of a `kind` (`timer`, `source`) that was invalidated.
    static func invalid(_ kind: String) -> ErrorCode { kind == "timer" ? .timerInvalid : .sourceInvalid }

    /// Puts `record` (a `kind`, `itemId`) in one more mode: `add` makes the
    /// CF call, only when the mode is new to it. Returns whether it was new.
    func addToMode(
        _ record: some ModeScheduled, kind: String, itemId: String, mode: RunLoopMode, add: (CFRunLoop) -> Void
    ) throws(RunLoopError) -> Bool {
        guard record.isValid else { throw .conflict(Self.invalid(kind), "\(kind) \(itemId) was invalidated") }
        let loop = try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            b.filled(mode.name)
            return b.loop
        }
        let added = record.modeSet.add(mode.name)
        if added, let loop { add(loop) }
        touch()
        noteMode(mode)
        unwarn(.emptyModeAsleep)
        return added
    }

    /// Takes `record` out of one mode (it stays valid in its others): the
    /// removal is recorded for the mode's exit causes, `remove` makes the CF
    /// call; the loop is woken (to notice an emptied mode) only when asked,
    /// since `CFRunLoopRemoveSource` / `CFRunLoopRemoveTimer` never wake it.
    func removeFromMode(
        _ record: some ModeScheduled, kind: String, itemId: String, mode: RunLoopMode, wakeUp: Bool,
        remove: (CFRunLoop) -> Void
    ) throws(RunLoopError) {
        guard record.isValid else { throw .conflict(Self.invalid(kind), "\(kind) \(itemId) was invalidated") }
        let modes = record.modes
        guard modes.contains(mode.name) else {
            throw .conflict(
                .notInMode,
                "\(kind) \(itemId) is not in mode \(mode.name) (it is in \(modes.joined(separator: ", ")))",
                field: "mode")
        }
        let loop = book.withLock { b in
            b.removed(kind, itemId, how: "was removed from the mode", from: mode.name)
            return b.loop
        }
        if let loop { remove(loop) }
        _ = record.modeSet.remove(mode.name)
        afterRemoval(from: [mode.name], wakeUp: wakeUp)
    }
}
