import Foundation
import ProtFS
import ProtFSSystem

/// One item met by a `DeviceWalker`: a file or directory inside a container, with its effective class.
package struct WalkEntry: Sendable {
  /// The directory holding the item; every operation on the item is relative to it.
  package var parent: DirectoryHandle
  /// The item's name in `parent`.
  package var name: String
  /// `.file` or `.directory` (symlinks and special files are never handed out).
  package var kind: FileKind
  /// The effective class (docs/semantics.md §2); nil when the walk was asked not to read classes.
  package var protectionClass: ProtectionClass?
  /// Set when the item's own class attribute holds garbage; `protectionClass` is then the inherited one.
  package var classError: ProtFSError?

  package var path: String { parent.pathOf(name) }
}

/// Visits every file and directory of every container of a device with a few threads that split
/// the directories between them (measured fastest here: readdir's d_type, then `*xattrat`/`fchmodat2`
/// relative to the directory's descriptor, never a full path, never following a symlink).
package struct DeviceWalker {
  /// The device to walk.
  package var device: Device
  /// Whether to read each item's class; an unlock does not need them.
  package var readsClasses: Bool
  /// How many threads walk.
  package var threads: Int = 2
  /// Lets class reads widen an unprivileged owner's unreadable item (during transitions only).
  package var ownerAccess: OwnerAccessLog? = nil

  /// What a walk found besides what the visitor gathered.
  package struct Summary {
    /// Directories that could not be listed or opened, and other walk failures.
    var failures: [ProtFSError] = []
    /// Symlinks and special files left alone.
    var skipped = 0
  }

  /// Walks the device, giving each worker thread its own `Accumulator` (made by `make`), and returns them.
  package func walk<Accumulator: Sendable>(
    make: () -> Accumulator, visit: @escaping @Sendable (inout Accumulator, WalkEntry) -> Void
  ) throws(ProtFSError) -> (accumulators: [Accumulator], summary: Summary) {
    let root = try device.openRoot()
    let containers = try device.openDirectory(Device.containersPath)
    var inherited: ProtectionClass?
    if readsClasses {
      inherited = try? root.protectionClass()
      if let own = try? containers.protectionClass() { inherited = own }
    }
    let queue = WorkQueue()
    var seeds: [Work] = []
    var first = make()
    var summary = Summary()
    // The container roots are items too; their class falls back to the container's default.
    try containers.forEachEntry { name, kind in
      var kind = kind
      if kind == .unknown { kind = (try? containers.status(name).kind) ?? .other }
      guard kind == .file || kind == .directory else {
        summary.skipped += 1
        return
      }
      var fallback = inherited ?? .containerDefault
      if kind == .directory, inherited == nil, let handle = try? containers.openDirectory(name),
        let stored = try? handle.defaultClass()
      {
        fallback = stored
      }
      let entry = Self.entry(containers, name, kind, fallback: fallback, readsClasses: readsClasses, ownerAccess)
      visit(&first, entry)
      if kind == .directory {
        seeds.append(
          Work(path: containers.pathOf(name), parent: containers, name: name, protectionClass: entry.protectionClass))
      }
    }
    queue.push(seeds)
    let count = max(1, threads)
    var accumulators = [first] + (1..<count).map { _ in make() }
    let results = AccumulatorBox(accumulators)
    let done = DispatchGroup()
    for index in 1..<count {
      done.enter()
      let thread = Thread { [readsClasses, ownerAccess] in
        var mine = results.take(index)
        Self.work(queue, &mine, visit, readsClasses: readsClasses, ownerAccess)
        results.put(index, mine)
        done.leave()
      }
      thread.stackSize = 1 << 20
      thread.start()
    }
    var mine = results.take(0)
    Self.work(queue, &mine, visit, readsClasses: readsClasses, ownerAccess)
    results.put(0, mine)
    done.wait()
    accumulators = results.all()
    summary.failures += queue.failures
    summary.skipped += queue.skipped
    return (accumulators, summary)
  }

  private static func entry(
    _ parent: DirectoryHandle, _ name: String, _ kind: FileKind, fallback: ProtectionClass?,
    readsClasses: Bool, _ ownerAccess: OwnerAccessLog?
  ) -> WalkEntry {
    guard readsClasses else { return WalkEntry(parent: parent, name: name, kind: kind) }
    switch FastAttributes.protectionClass(parent, name) {
    case .value(let own): return WalkEntry(parent: parent, name: name, kind: kind, protectionClass: own)
    case .absent: return WalkEntry(parent: parent, name: name, kind: kind, protectionClass: fallback)
    case .unusual: break
    }
    do {
      let own = try Self.ownClass(parent, name, ownerAccess)
      return WalkEntry(parent: parent, name: name, kind: kind, protectionClass: own ?? fallback)
    } catch {
      return WalkEntry(parent: parent, name: name, kind: kind, protectionClass: fallback, classError: error)
    }
  }

  /// The own class of `name`, reading it with temporary owner access when its mode forbids reading
  /// attributes (an unprivileged owner of a locked file).
  package static func ownClass(_ parent: DirectoryHandle, _ name: String, _ ownerAccess: OwnerAccessLog?)
    throws(ProtFSError) -> ProtectionClass?
  {
    do {
      return try parent.protectionClass(of: name)
    } catch  where error.errno == EACCES {
      return try ModeEnforcer.withOwnerAccess(parent, name, ownerAccess) { () throws(ProtFSError) in
        try parent.protectionClass(of: name)
      }
    }
  }

  private static func work<Accumulator: Sendable>(
    _ queue: WorkQueue, _ accumulator: inout Accumulator, _ visit: (inout Accumulator, WalkEntry) -> Void,
    readsClasses: Bool, _ ownerAccess: OwnerAccessLog?
  ) {
    while let item = queue.next() {
      defer { queue.finish() }
      let directory: DirectoryHandle
      do {
        directory = try item.parent.openDirectory(item.name)
      } catch {
        queue.fail(error)
        continue
      }
      var children: [Work] = []
      var skipped = 0
      do {
        try directory.forEachEntry { name, kind in
          var kind = kind
          if kind == .unknown { kind = (try? directory.status(name).kind) ?? .other }
          guard kind == .file || kind == .directory else {
            skipped += 1
            return
          }
          let entry = Self.entry(
            directory, name, kind, fallback: item.protectionClass, readsClasses: readsClasses, ownerAccess)
          visit(&accumulator, entry)
          if kind == .directory {
            children.append(
              Work(path: directory.pathOf(name), parent: directory, name: name, protectionClass: entry.protectionClass))
          }
        }
      } catch {
        queue.fail(error)
      }
      queue.push(children, skipped: skipped)
    }
  }
}

/// A directory still to walk: opened by the worker that takes it, relative to its parent.
private struct Work {
  var path: String
  var parent: DirectoryHandle
  var name: String
  var protectionClass: ProtectionClass?
}

/// The walkers' shared stack of directories.
///
/// `@unchecked Sendable`: every stored property is read and written only while `condition` is held.
private final class WorkQueue: @unchecked Sendable {
  private let condition = NSCondition()
  private var stack: [Work] = []
  private var busy = 0
  private(set) var failures: [ProtFSError] = []
  private(set) var skipped = 0

  func push(_ items: [Work], skipped: Int = 0) {
    condition.lock()
    stack += items
    self.skipped += skipped
    condition.broadcast()
    condition.unlock()
  }

  /// The next directory, or nil once the stack is empty and no worker can add to it.
  func next() -> Work? {
    condition.lock()
    defer { condition.unlock() }
    while true {
      if let item = stack.popLast() {
        busy += 1
        return item
      }
      if busy == 0 { return nil }
      condition.wait()
    }
  }

  func finish() {
    condition.lock()
    busy -= 1
    if busy == 0 { condition.broadcast() }
    condition.unlock()
  }

  func fail(_ error: ProtFSError) {
    condition.lock()
    failures.append(error)
    condition.unlock()
  }
}

/// Hands each worker thread its accumulator and takes it back.
///
/// `@unchecked Sendable`: the slots are touched only under `lock`, and each by one thread at a time.
private final class AccumulatorBox<Accumulator: Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var slots: [Accumulator?]

  init(_ values: [Accumulator]) { slots = values }

  func take(_ index: Int) -> Accumulator {
    lock.lock()
    defer { lock.unlock() }
    let value = slots[index]!
    slots[index] = nil
    return value
  }

  func put(_ index: Int, _ value: Accumulator) {
    lock.lock()
    slots[index] = value
    lock.unlock()
  }

  func all() -> [Accumulator] {
    lock.lock()
    defer { lock.unlock() }
    return slots.map { $0! }
  }
}
