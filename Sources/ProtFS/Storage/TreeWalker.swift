import Foundation
import ProtFSSystem
import Synchronization

/// One entry met by a `TreeWalker`. `name` points into the `dirent` and is valid only during the visit.
public struct TreeEntry {
  /// The directory holding the entry; operate on the entry relative to it.
  public let directory: DirectoryHandle
  /// The entry's name, as a C string valid only during the visit.
  public let name: UnsafePointer<CChar>
  /// The entry's type: `d_type`, else a no-follow stat; `.unknown` only when that stat failed (the entry vanished).
  public let kind: FileKind
  /// Which of the roots this entry is under (its index in the roots handed to the walk).
  public let root: Int
  /// What the entry inherits; a visitor may set the container default when the entry is a container root.
  public var inheritance: ClassInheritance
  /// The entry's own class, when the visitor read it: its children inherit it.
  public var ownClass: ProtectionClass?

  /// The name as a `String` (a name that is not UTF-8 is decoded with replacement characters).
  public var nameString: String { String(cString: name) }
  /// The name as the kernel has it, UTF-8 or not.
  public var fileName: FileName { FileName(cString: name) }
  /// The entry's effective class and where it came from, from `ownClass` and `inheritance`.
  public var effectiveClass: EffectiveClass { inheritance.effective(own: ownClass) }

  /// Takes the default class stored on the entry, a container root, into its inheritance: what
  /// nothing above the container decides, its default does.
  public mutating func readContainerDefault() throws(ProtFSError) {
    inheritance = inheritance.inContainer(defaultClass: try directory.openDirectory(nameString).defaultClass())
  }
}

/// What a `TreeWalker` calls. Each walking thread works on its own copy of the visitor, so a visitor
/// needs no locking: it accumulates in its own properties, and the caller merges the copies.
public protocol TreeVisitor: Sendable {
  /// What the visitor carries from a directory down to its entries (a path, a depth, ...).
  associatedtype Context: Sendable

  /// Called on the worker that took a directory, once it is open and before it is listed.
  mutating func enter(_ directory: DirectoryHandle, _ context: Context)
  /// Called for every entry of a directory (without `.` and `..`), in readdir order.
  mutating func visit(_ entry: inout TreeEntry, in context: Context) -> TreeStep<Context>
  /// Called when a directory cannot be opened or listed (`context` is the directory's own);
  /// returns whether the walk goes on.
  mutating func failed(_ error: ProtFSError, in context: Context) -> Bool
  /// Called once a directory and everything below it were visited, when the walk was asked for it
  /// (`postOrder`); `directory` is the directory's parent and `name` its name (nil for a root).
  mutating func leave(_ name: String?, in parent: DirectoryHandle?, _ context: Context)
}

extension TreeVisitor {
  /// Does nothing.
  public mutating func enter(_ directory: DirectoryHandle, _ context: Context) {}
  /// Does nothing.
  public mutating func leave(_ name: String?, in parent: DirectoryHandle?, _ context: Context) {}
}

/// What to do after visiting an entry.
public enum TreeStep<Context> {
  /// Go on with the next entry; do not walk below this one.
  case skip
  /// Walk the directory's entries with `Context` (ignored for anything but a directory).
  case descend(Context)
  /// Stop the whole walk: no worker takes another directory.
  case stop
}

/// The one walk of directory trees: a few threads share out the directories on one stack,
/// each listing a directory with readdir's `d_type` and working relative to the directory's
/// descriptor (opened without following a symlink by the thread that takes it), never a full path.
/// The class a directory passes down (`ClassInheritance`) travels with it.
public struct TreeWalker: Sendable {
  /// A directory where a walk starts.
  public struct Root<Context: Sendable>: Sendable {
    /// The directory, open.
    public var directory: DirectoryHandle
    /// The visitor's context for its entries.
    public var context: Context
    /// What its entries inherit.
    public var inheritance: ClassInheritance

    /// A root.
    public init(_ directory: DirectoryHandle, _ context: Context, inheritance: ClassInheritance = ClassInheritance()) {
      self.directory = directory
      self.context = context
      self.inheritance = inheritance
    }
  }

  /// How many threads walk (the calling thread is one of them).
  public var threads: Int
  /// Whether the visitor's `leave` is called (after a directory's whole subtree).
  public var postOrder: Bool
  /// For tests: resolves every entry's type with a stat, as when the filesystem leaves `d_type` unknown.
  package var ignoresDirentType = false

  /// A walker with `threads` threads (at least one).
  public init(threads: Int = 2, postOrder: Bool = false) {
    self.threads = max(1, threads)
    self.postOrder = postOrder
  }

  /// Walks below every root with copies of `visitor`, one per thread, and returns the copies
  /// (the calling thread's first) and whether the walk was stopped.
  public func walk<Visitor: TreeVisitor>(_ roots: [Root<Visitor.Context>], visitor: Visitor)
    -> (visitors: [Visitor], stopped: Bool)
  {
    let stack = TreeWorkStack<Visitor.Context>(
      roots.enumerated().reversed().map { index, root in
        TreeWork(
          opened: root.directory, parent: nil, name: nil, root: index, context: root.context,
          inheritance: root.inheritance,
          frame: postOrder ? TreeFrame(parent: nil, name: nil, in: nil, root.context) : nil)
      })
    let results = Mutex<[(Int, Visitor)]>([])
    let walker = self
    let worker: @Sendable (Int) -> Void = { index in
      var mine = visitor
      while let work = stack.next() {
        walker.process(work, &mine, stack)
      }
      let done = mine
      results.withLock { $0.append((index, done)) }
    }
    let group = DispatchGroup()
    #if DEBUG
      // Debug builds: the walking threads see the caller's planned syscall failures too.
      let faults = SyscallFaults.current
    #endif
    for index in 1..<threads {
      group.enter()
      let thread = Thread {
        #if DEBUG
          if let faults { faults.during { worker(index) } } else { worker(index) }
        #else
          worker(index)
        #endif
        group.leave()
      }
      thread.stackSize = 1 << 20
      thread.start()
    }
    worker(0)
    group.wait()
    let visitors = results.withLock { $0.sorted { $0.0 < $1.0 }.map(\.1) }
    return (visitors, stack.stopped)
  }

  /// Opens and lists one directory, visiting its entries and pushing the subdirectories to walk.
  private func process<Visitor: TreeVisitor>(
    _ work: TreeWork<Visitor.Context>, _ visitor: inout Visitor, _ stack: TreeWorkStack<Visitor.Context>
  ) {
    var children: [TreeWork<Visitor.Context>] = []
    defer {
      work.frame?.add(children.count)
      stack.finish(adding: children)
      if let frame = work.frame { complete(frame, &visitor, stack) }
    }
    let directory: DirectoryHandle
    do throws(ProtFSError) {
      if let opened = work.opened {
        directory = opened
      } else {
        directory = try work.parent!.openDirectory(work.name!)
      }
    } catch {
      if !visitor.failed(error, in: work.context) { stack.stop() }
      return
    }
    visitor.enter(directory, work.context)
    var stopping = false
    do throws(ProtFSError) {
      try directory.forEachRawEntry { name, direntKind throws(ProtFSError) in
        let kind = directory.resolvedKind(name, ignoresDirentType ? .unknown : direntKind)
        var entry = TreeEntry(
          directory: directory, name: name, kind: kind, root: work.root, inheritance: work.inheritance, ownClass: nil)
        switch visitor.visit(&entry, in: work.context) {
        case .skip: return
        case .stop:
          stopping = true
          throw ProtFSError(.invalidArgument, "The walk was stopped.")
        case .descend(let context):
          guard kind == .directory else { return }
          // Opened by its bytes: a name that is not UTF-8 is walked as any other.
          let childName = FileName(cString: name)
          children.append(
            TreeWork(
              opened: nil, parent: directory, name: childName, root: work.root, context: context,
              inheritance: entry.inheritance.below(own: entry.ownClass),
              frame: work.frame.map { TreeFrame(parent: $0, name: String(cString: name), in: directory, context) }))
        }
      }
    } catch {
      if stopping || !visitor.failed(error, in: work.context) { stack.stop() }
    }
  }

  /// Marks one directory's own listing done, and calls `leave` for each directory whose subtree is now done.
  private func complete<Visitor: TreeVisitor>(
    _ frame: TreeFrame<Visitor.Context>, _ visitor: inout Visitor, _ stack: TreeWorkStack<Visitor.Context>
  ) {
    var current: TreeFrame<Visitor.Context>? = frame
    while let done = current, done.finishOne() {
      if !stack.stopped { visitor.leave(done.name, in: done.parent, done.context) }
      current = done.up
    }
  }
}

/// One directory still to walk: a root (already open) or a subdirectory that the worker taking
/// it opens relative to its parent, so that pending work holds no descriptor of its own.
///
/// `@unchecked Sendable`: a work item is owned by one thread at a time, handed between workers
/// through `TreeWorkStack` under its condition; `Context` is not required to be Sendable because
/// a walk's contexts are values its visitor makes and only reads.
package struct TreeWork<Context>: @unchecked Sendable {
  /// The directory when it is a root.
  package var opened: DirectoryHandle?
  /// The directory holding it (not a root).
  package var parent: DirectoryHandle?
  /// Its name in `parent` (not a root), as the kernel has it.
  package var name: FileName?
  /// Which root it is under.
  package var root: Int
  /// The visitor's context for its entries.
  package var context: Context
  /// What its entries inherit.
  package var inheritance: ClassInheritance
  /// Its place in the post-order bookkeeping, when the walk is post-order.
  package var frame: TreeFrame<Context>?
}

/// A directory whose subtree is not done yet: its own listing and each child's subtree count one.
///
/// `@unchecked Sendable`: everything is immutable but `remaining`, an `Atomic`; `context` is only
/// read, as in `TreeWork`.
package final class TreeFrame<Context>: @unchecked Sendable {
  /// The frame of the directory holding this one.
  package let up: TreeFrame<Context>?
  /// The directory's name (nil for a root).
  package let name: String?
  /// The directory holding it (nil for a root).
  package let parent: DirectoryHandle?
  /// The visitor's context for the directory.
  package let context: Context
  /// Parts not done yet: the directory's own listing, then one per child subtree.
  private let remaining = Atomic<Int>(1)

  /// The frame of `name` in `parent`, below `up`.
  package init(parent up: TreeFrame<Context>?, name: String?, in parent: DirectoryHandle?, _ context: Context) {
    self.up = up
    self.name = name
    self.parent = parent
    self.context = context
  }

  /// Counts `count` more subtrees to wait for.
  package func add(_ count: Int) {
    if count > 0 { remaining.add(count, ordering: .relaxed) }
  }

  /// Counts one part done; true when it was the last.
  package func finishOne() -> Bool {
    remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0
  }
}

/// The walkers' one stack of directories: depth-first, so that it stays as small as the tree is
/// wide along one path; the walk is over when it is empty and no worker is listing.
///
/// `@unchecked Sendable`: every stored property is read and written only while `condition` is held.
package final class TreeWorkStack<Context>: @unchecked Sendable {
  /// Guards everything below.
  private let condition = NSCondition()
  /// The directories waiting to be listed.
  private var pending: [TreeWork<Context>]
  /// How many workers are listing a directory (and may push more).
  private var busy = 0
  /// Set when a visitor stopped the walk.
  private var isStopped = false

  /// A stack holding the roots.
  package init(_ initial: [TreeWork<Context>]) { pending = initial }

  /// Whether a visitor stopped the walk.
  package var stopped: Bool {
    condition.lock()
    defer { condition.unlock() }
    return isStopped
  }

  /// The next directory, waiting while other workers may still add some; nil when the walk is over.
  package func next() -> TreeWork<Context>? {
    condition.lock()
    defer { condition.unlock() }
    while true {
      if isStopped { return nil }
      if let work = pending.popLast() {
        busy += 1
        return work
      }
      if busy == 0 { return nil }
      condition.wait()
    }
  }

  /// Adds the subdirectories found in one directory and marks that directory done.
  package func finish(adding children: [TreeWork<Context>]) {
    condition.lock()
    pending += children
    busy -= 1
    if !children.isEmpty || busy == 0 { condition.broadcast() }
    condition.unlock()
  }

  /// Stops the walk: every worker returns once it is done with its directory.
  package func stop() {
    condition.lock()
    isStopped = true
    pending.removeAll()
    condition.broadcast()
    condition.unlock()
  }
}
