import Foundation
import Primitives
import RunLoopCore

/// The idle task queue: add, remove, suspend, resume, execute now. Run on the control loop.
extension API {
    func addTasks(_ r: inout Router) {
        r.add(.post, "/api/threads/{id}/tasks") { ctx throws(RunLoopError) in
            let body = try ctx.body(["id", "selector", "args"])
            let target = try worker(ctx)
            let taskId = try body.requiredString("id", maxLength: 64)
            let queue = try target.addTask(id: taskId, call: try body.selectorCallHere())
            return .json(201, Rep.tasks(queue))
        }
        r.add(.get, "/api/threads/{id}/tasks") { ctx throws(RunLoopError) in
            .json(200, Rep.tasks(try worker(ctx).taskSnapshot()))
        }
        r.add(.delete, "/api/threads/{id}/tasks") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let removed = try target.removeAllTasks()
            var object = Rep.tasks(target.taskSnapshot()).object ?? [:]
            object["removed"] = .number(Double(removed))
            return .json(200, .object(object))
        }
        r.add(.delete, "/api/threads/{id}/tasks/{taskId}") { ctx throws(RunLoopError) in
            .json(200, Rep.tasks(try worker(ctx).removeTask(id: ctx.param("taskId"))))
        }
        r.add(.post, "/api/threads/{id}/tasks/suspend") { ctx throws(RunLoopError) in
            _ = try ctx.body([])
            return .json(200, Rep.tasks(try worker(ctx).setTasksSuspended(true)))
        }
        r.add(.post, "/api/threads/{id}/tasks/resume") { ctx throws(RunLoopError) in
            _ = try ctx.body([])
            return .json(200, Rep.tasks(try worker(ctx).setTasksSuspended(false)))
        }
        r.add(.post, "/api/threads/{id}/tasks/execute") { ctx throws(RunLoopError) in
            let body = try ctx.body(["selector", "args"])
            let target = try worker(ctx)
            let performId = try target.executeTask(try body.selectorCallHere())
            return .json(202, ["performId": .string(performId), "thread": .string(target.id)])
        }
    }
}
