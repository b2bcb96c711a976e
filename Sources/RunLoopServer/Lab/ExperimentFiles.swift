import Foundation
import Primitives
import RunLoopCore

/// Reading experiment files: one file, or every `*.json` of a folder (sorted).
public enum ExperimentFiles {
    /// The experiments at `path` (a file or a folder), each with its file name.
    public static func load(_ path: String) throws(RunLoopError) -> [(file: String, experiment: Experiment)] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .notFound("experiment file or folder", path)
        }
        var files = [path]
        if isDirectory.boolValue {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            files = names.filter { $0.hasSuffix(".json") }.sorted().map {
                (path as NSString).appendingPathComponent($0)
            }
        }
        var result: [(String, Experiment)] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw .badValue("experiment", "\(file): cannot read it")
            }
            let id = ((file as NSString).lastPathComponent as NSString).deletingPathExtension
            do throws(RunLoopError) {
                result.append((file, try Experiment(JSON.parse(Array(data)), fallbackId: id)))
            } catch {
                throw .badValue("experiment", "\(file): \(error.message)")
            }
        }
        return result
    }
}
