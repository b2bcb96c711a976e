import CoreFoundation
import Foundation

/// What a CF source's C callbacks reach: the Swift object behind a source.
protocol SourceCallbacks: AnyObject, Sendable {
    /// The schedule routine: the source was added to a mode.
    func sourceScheduled(mode: CFRunLoopMode?)
    /// The cancel routine: the source was removed from a mode or invalidated.
    func sourceCancelled(mode: CFRunLoopMode?)
    /// The perform routine: the source fired (on the loop's thread).
    func sourcePerform()
}

/// The `info` CF keeps for a source: a weak link to its Swift object, so the
/// source never keeps its owner alive (no retain cycle), plus the descriptor a
/// version-1 source reports from `getPort`.
///
/// Thread-safety: immutable (`target` is a weak reference set at creation).
final class SourceBox: Sendable {
    weak let target: (any SourceCallbacks)?
    let port: Int32

    init(target: any SourceCallbacks, port: Int32 = -1) {
        self.target = target
        self.port = port
    }

    static func from(_ info: UnsafeRawPointer?) -> SourceBox? {
        guard let info else { return nil }
        return Unmanaged<SourceBox>.fromOpaque(info).takeUnretainedValue()
    }
}

/// Builds CF sources whose routines call a `SourceCallbacks` object.
enum SourceFactory {
    /// CF's retain and release of a source's `info`: the `SourceBox`.
    private static let retainBox: @convention(c) (UnsafeRawPointer?) -> UnsafeRawPointer? = { info in
        if let info { _ = Unmanaged<SourceBox>.fromOpaque(info).retain() }
        return info
    }
    private static let releaseBox: @convention(c) (UnsafeRawPointer?) -> Void = { info in
        if let info { Unmanaged<SourceBox>.fromOpaque(info).release() }
    }

    /// A version-0 (custom) source: schedule / perform / cancel routines.
    static func makeSource0(order: Int, target: any SourceCallbacks) -> CFRunLoopSource {
        let box = SourceBox(target: target)
        var context = CFRunLoopSourceContext()
        context.version = 0
        context.info = Unmanaged.passUnretained(box).toOpaque()
        context.retain = retainBox
        context.release = releaseBox
        context.schedule = { info, _, mode in
            SourceBox.from(info)?.target?.sourceScheduled(mode: mode)
        }
        context.cancel = { info, _, mode in
            SourceBox.from(info)?.target?.sourceCancelled(mode: mode)
        }
        context.perform = { info in
            SourceBox.from(info)?.target?.sourcePerform()
        }
        return CFRunLoopSourceCreate(kCFAllocatorDefault, order, &context)
    }

    /// A version-1 (port) source watching descriptor `fd`. CF adds the descriptor
    /// to the mode's epoll set edge-triggered and reads 8 bytes from it before
    /// calling `perform`.
    static func makeSource1(order: Int, fd: Int32, target: any SourceCallbacks) -> CFRunLoopSource {
        let box = SourceBox(target: target, port: fd)
        var context = CFRunLoopSourceContext1()
        context.version = 1
        context.info = Unmanaged.passUnretained(box).toOpaque()
        context.retain = retainBox
        context.release = releaseBox
        context.getPort = { info in
            SourceBox.from(info)?.port ?? -1
        }
        context.perform = { info in
            SourceBox.from(info)?.target?.sourcePerform()
        }
        return withUnsafeMutablePointer(to: &context) { pointer in
            pointer.withMemoryRebound(to: CFRunLoopSourceContext.self, capacity: 1) {
                CFRunLoopSourceCreate(kCFAllocatorDefault, order, $0)
            }
        }
    }
}
