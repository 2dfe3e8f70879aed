import Foundation
import Synchronization

/// Walks directory subtrees with a few threads that share out the directories between them
/// (PERF-NOTES: readdir's d_type and calls relative to the directory's descriptor, never a full
/// path, never following a symlink).
///
/// Each thread has its own accumulator, so the visitor needs no locking; the caller merges them.
public struct SubtreeWalker: Sendable {
  /// One directory waiting to be listed.
  struct Work: @unchecked Sendable {
    var directory: DirectoryHandle
    var relativePath: String
  }

  /// How many threads walk.
  public var threads: Int

  /// A walker with `threads` threads (at least one).
  public init(threads: Int = 2) { self.threads = max(1, threads) }

  /// Visits every entry below each root. `visit` gets the entry's directory, its name, its kind
  /// (`d_type`, resolved with a stat when the filesystem does not fill it in) and the directory's path
  /// relative to its root ("" for the root itself). Returning true for a directory descends into it.
  /// Directories that cannot be opened or listed are collected in `failures`, not thrown.
  public func walk<Accumulator: Sendable>(
    roots: [(DirectoryHandle, String)], make: @escaping @Sendable () -> Accumulator,
    visit: @escaping @Sendable (inout Accumulator, DirectoryHandle, String, FileKind, String) -> Bool
  ) -> (accumulators: [Accumulator], failures: [ProtFSError]) {
    let queue = WorkQueue(roots.map { Work(directory: $0.0, relativePath: $0.1) })
    let results = Mutex<[(Accumulator, [ProtFSError])]>([])
    let worker: @Sendable () -> Void = {
      var accumulator = make()
      var failures: [ProtFSError] = []
      while let work = queue.next() {
        var children: [Work] = []
        do throws(ProtFSError) {
          try work.directory.forEachEntry { name, kind in
            var kind = kind
            if kind == .unknown { kind = (try? work.directory.status(name).kind) ?? .other }
            let descend = visit(&accumulator, work.directory, name, kind, work.relativePath)
            guard descend, kind == .directory else { return }
            do throws(ProtFSError) {
              let child = try work.directory.openDirectory(name)
              let path = work.relativePath.isEmpty ? name : work.relativePath + "/" + name
              children.append(Work(directory: child, relativePath: path))
            } catch {
              failures.append(error)
            }
          }
        } catch {
          failures.append(error)
        }
        queue.finish(adding: children)
      }
      results.withLock { $0.append((accumulator, failures)) }
    }
    let group = DispatchGroup()
    for _ in 1..<threads {
      group.enter()
      Thread {
        worker()
        group.leave()
      }.start()
    }
    worker()
    group.wait()
    return results.withLock { all in (all.map(\.0), all.flatMap(\.1)) }
  }

  /// A queue of directories that knows when the walk is over: empty, and nobody still listing.
  final class WorkQueue: Sendable {
    private struct State {
      var pending: [Work]
      var busy = 0
    }
    private let state: Mutex<State>
    private let condition = NSCondition()

    init(_ initial: [Work]) { state = Mutex(State(pending: initial)) }

    func next() -> Work? {
      condition.lock()
      defer { condition.unlock() }
      while true {
        let (work, over) = state.withLock { s -> (Work?, Bool) in
          if let work = s.pending.popLast() {
            s.busy += 1
            return (work, false)
          }
          return (nil, s.busy == 0)
        }
        if let work { return work }
        if over { return nil }
        condition.wait()
      }
    }

    func finish(adding children: [Work]) {
      condition.lock()
      state.withLock { s in
        s.pending += children
        s.busy -= 1
      }
      condition.broadcast()
      condition.unlock()
    }
  }
}
