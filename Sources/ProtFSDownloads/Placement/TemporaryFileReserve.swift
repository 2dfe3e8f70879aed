import Foundation
import ProtFSSystem
import Synchronization

/// New temp files made ahead of the transfers that take them, off the engine's thread: unnamed
/// (`O_TMPFILE`), labelled and held open in the temp directory the engine last made one in. The
/// finisher makes them after each batch, on a core the engine's network work leaves idle; the
/// engine takes one per new transfer instead of making it (the largest part of a small file's
/// launch).
///
/// A file is taken only within one access-check interval of its making, the window in which the
/// engine already trusts a held directory, so its label is as fresh as the engine's own would be;
/// the finisher makes none where the access policy would refuse a new temp file (a protected
/// directory while locked), nor on a filesystem without unnamed files, nor on a sealed device
/// (the engine gives each new file its key as it makes it).
///
/// Only as many are made as will be taken: no more than the transfers queued to start, nor than
/// twice the launches since the last refill (slow transfers take few, and a file left to go stale
/// is made in vain). A file made and never taken is freed unused, and on ext4 without a journal every
/// inode freed in the last minutes is skipped, one by one, by each new file's allocation.
package final class TemporaryFileReserve: Sendable {
  private struct Made {
    var file: FileDescriptor
    var made: UInt64
  }

  private struct State {
    /// The held temp directory, and its path, the engine last made a new file in.
    var directory: DirectoryHandle?
    var path = ""
    var ready: [Made] = []
    /// How many transfers the engine has queued to start (`expect(_:)`): files are made only for
    /// them, and an idle engine's are closed (`drain()`), so that a session waiting for work holds
    /// none.
    var queued = 0
    /// Launches that asked for a file since the last refill.
    var asked = 0
    /// Set once the filesystem refused an unnamed file: nothing is made ahead any more.
    var unsupported = false
  }

  /// How many files are kept ready.
  package let capacity: Int
  /// How long a made file may wait, in nanoseconds.
  private let freshness: UInt64
  private let state = Mutex(State())
  /// Files made ahead and taken by a transfer, those closed without because they waited longer
  /// than `freshness`, and those closed without for another reason.
  private let used = Atomic(0)
  private let expired = Atomic(0)
  private let unused = Atomic(0)

  /// How many files made ahead went to a transfer so far.
  package var taken: Int { used.load(ordering: .relaxed) }
  /// How many files were made ahead in vain so far: closed stale, for another directory, or idle.
  package var discarded: Int { stale + unneeded }
  /// How many of those were closed stale: how many depends on how the threads were scheduled (a
  /// file waits longer on a busy machine), not on how many were made.
  package var stale: Int { expired.load(ordering: .relaxed) }
  /// How many were closed for another directory or when the engine went idle: made beyond what
  /// the transfers took.
  package var unneeded: Int { unused.load(ordering: .relaxed) }

  package init(capacity: Int, freshness: Duration) {
    self.capacity = capacity
    self.freshness = Monotonic.nanoseconds(freshness)
  }

  deinit { drain() }

  /// A ready file in `directory` (the engine's held handle for `path`), made recently enough; nil
  /// when there is none. Either way `directory` becomes the one files are made in from now on.
  package func take(in directory: DirectoryHandle, path: String) -> FileDescriptor? {
    let now = Monotonic.coarse
    var elsewhere: [FileDescriptor] = []
    var stale: [FileDescriptor] = []
    let file = state.withLock { s -> FileDescriptor? in
      s.asked += 1
      if s.directory !== directory {
        elsewhere = s.ready.map(\.file)
        s.ready.removeAll()
        s.directory = directory
        s.path = path
      }
      while let last = s.ready.popLast() {
        if now &- last.made < freshness { return last.file }
        stale.append(last.file)
      }
      return nil
    }
    discard(elsewhere)
    discard(stale, stale: true)
    if file != nil { used.add(1, ordering: .relaxed) }
    return file
  }

  /// The engine has `count` transfers queued to start, which are all the files it will take.
  package func expect(_ count: Int) {
    state.withLock { $0.queued = count }
  }

  /// How many files `s` should have ready: no more than the transfers queued, nor than twice the
  /// launches since the last refill, nor than `capacity`.
  private func target(_ s: State) -> Int {
    s.unsupported ? 0 : min(capacity, s.queued, 2 * s.asked)
  }

  /// Makes files until `target` are ready in the engine's temp directory, where `policy` allows a
  /// new temp file now, each labelled by `fileSystem` as the engine labels its own.
  package func refill(fileSystem: any DownloadFileSystem, policy: any DownloadAccessPolicy) {
    let (directory, path, missing) = state.withLock { s in
      let missing = target(s) - s.ready.count
      if missing > 0 { s.asked = 0 }
      return (s.directory, s.path, missing)
    }
    guard let directory, missing > 0, policy.canWriteTemp(in: path) == .allow else { return }
    // On a sealed device the engine gives each new file its key as it makes it: none are made ahead.
    // A failure to read the seal is the engine's to report, with its task.
    guard case .success(nil) = Result(catching: { () throws(ProtFSError) in try fileSystem.sealing() }) else {
      return
    }
    // One refill is one operation: the directory's class and owner are read once for its files.
    guard let labels = try? fileSystem.labels(for: directory) else { return }
    for _ in 0..<missing {
      let made: FileDescriptor?
      do {
        made = try TemporaryFile.makeUnnamed(in: directory) { fd throws(ProtFSError) in try labels.labelNew(fd) }
      } catch {
        // The engine meets the same failure making its own, and reports it with its task.
        return
      }
      guard let file = made else {
        state.withLock { $0.unsupported = true }
        return
      }
      let kept = state.withLock { s -> Bool in
        guard s.directory === directory, s.ready.count < min(capacity, s.queued) else { return false }
        s.ready.append(Made(file: file, made: Monotonic.coarse))
        return true
      }
      if !kept {
        discard([file])
        return
      }
    }
  }

  /// Closes every ready file (unnamed, they go with their descriptors) and makes no more until the
  /// engine queues transfers again: it has nothing left to start.
  package func drain() {
    let files = state.withLock { s -> [FileDescriptor] in
      s.queued = 0
      s.asked = 0
      defer { s.ready.removeAll() }
      return s.ready.map(\.file)
    }
    discard(files)
  }

  private func discard(_ files: [FileDescriptor], stale: Bool = false) {
    guard !files.isEmpty else { return }
    for file in files { file.close() }
    if stale { expired.add(files.count, ordering: .relaxed) } else { unused.add(files.count, ordering: .relaxed) }
  }
}
