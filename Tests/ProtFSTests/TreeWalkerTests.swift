import Foundation
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

@testable import ProtFS

/// A visitor that records every entry's relative path, kind and effective class, and any failure.
private struct Recorder: TreeVisitor {
  /// Names of directories not to walk into.
  var pruned: Set<String> = []
  /// Names of directories the visitor removes before returning `.descend`, so that opening them fails.
  var vanishing: Set<String> = []
  /// A name at which the visitor stops the walk.
  var stopAt: String?
  /// Every entry's path, in visiting order.
  var seen: [String] = []
  /// Each entry's kind.
  var kinds: [String: FileKind] = [:]
  /// Each file's and directory's effective class.
  var classes: [String: EffectiveClass] = [:]
  /// Directories that could not be opened or listed.
  var failures: [ProtFSError] = []
  /// Directories left (post-order), by path.
  var left: [String] = []

  mutating func visit(_ entry: inout TreeEntry, in directory: String) -> TreeStep<String> {
    let name = entry.nameString
    let path = directory.isEmpty ? name : directory + "/" + name
    seen.append(path)
    kinds[path] = entry.kind
    if name == stopAt { return .stop }
    if entry.kind == .file || entry.kind == .directory {
      entry.ownClass = try? entry.directory.protectionClass(of: name)
      classes[path] = entry.effectiveClass
    }
    if pruned.contains(name) { return .skip }
    if vanishing.contains(name) { unlinkat(entry.directory.fd, entry.name, AT_REMOVEDIR) }
    // Asks to descend into everything, symlinks included: the walker must refuse all but directories.
    return .descend(path)
  }

  mutating func failed(_ error: ProtFSError, in directory: String) -> Bool {
    failures.append(error)
    return true
  }

  mutating func leave(_ name: String?, in parent: DirectoryHandle?, _ directory: String) {
    left.append(directory)
  }
}

@Suite struct TreeWalkerTests {
  /// A temporary directory for one test, removed afterwards.
  final class Scratch {
    let path: String
    init() throws {
      path = try TestDevice.makeTemporaryDirectory(prefix: "protfs-walker")
    }
    deinit { TestDevice.removeTree(path) }

    func directory(_ relative: String) throws {
      try FileManager.default.createDirectory(atPath: path + "/" + relative, withIntermediateDirectories: true)
    }
    func file(_ relative: String) throws {
      let fd = open(path + "/" + relative, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
      guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
      close(fd)
    }
  }

  private func walk(
    _ root: String, threads: Int = 4, visitor: Recorder = Recorder(), postOrder: Bool = false,
    statsEveryEntry: Bool = false, inheritance: ClassInheritance = ClassInheritance()
  ) throws -> (Recorder, Bool) {
    var walker = TreeWalker(threads: threads, postOrder: postOrder)
    walker.ignoresDirentType = statsEveryEntry
    let (visitors, stopped) = walker.walk(
      [TreeWalker.Root(try DirectoryHandle(path: root), "", inheritance: inheritance)], visitor: visitor)
    var merged = Recorder()
    for v in visitors {
      merged.seen += v.seen
      merged.kinds.merge(v.kinds) { a, _ in a }
      merged.classes.merge(v.classes) { a, _ in a }
      merged.failures += v.failures
      merged.left += v.left
    }
    return (merged, stopped)
  }

  @Test func visitsEveryItemOfALargeTreeExactlyOnce() throws {
    let scratch = try Scratch()
    var expected: Set<String> = []
    for d in 0..<40 {
      try scratch.directory("d\(d)/inner")
      expected.formUnion(["d\(d)", "d\(d)/inner"])
      for f in 0..<60 {
        try scratch.file("d\(d)/f\(f)")
        expected.insert("d\(d)/f\(f)")
      }
      try scratch.file("d\(d)/inner/g")
      expected.insert("d\(d)/inner/g")
    }
    for threads in [1, 4] {
      let (recorder, stopped) = try walk(scratch.path, threads: threads)
      #expect(!stopped && recorder.failures.isEmpty)
      #expect(recorder.seen.count == expected.count)
      #expect(Set(recorder.seen) == expected)
    }
  }

  @Test func entriesInheritThroughNestedClassAttributes() throws {
    let scratch = try Scratch()
    try scratch.directory("a/b/c")
    try scratch.file("top")
    try scratch.file("a/b/c/f")
    let root = try DirectoryHandle(path: scratch.path)
    try root.setProtectionClass(.complete, of: "a")
    try root.openDirectory("a").openDirectory("b").setProtectionClass(.none, of: "c")
    let (recorder, _) = try walk(scratch.path, inheritance: ClassInheritance(containerDefault: .completeUnlessOpen))
    #expect(recorder.classes["top"] == EffectiveClass(.completeUnlessOpen, .default))
    #expect(recorder.classes["a"] == EffectiveClass(.complete, .own))
    #expect(recorder.classes["a/b"] == EffectiveClass(.complete, .inherited))
    #expect(recorder.classes["a/b/c"] == EffectiveClass(.none, .own))
    #expect(recorder.classes["a/b/c/f"] == EffectiveClass(.none, .inherited))
  }

  @Test func unknownDirentTypesAreResolvedWithAStat() throws {
    let scratch = try Scratch()
    try scratch.directory("dir/sub")
    try scratch.file("dir/sub/file")
    symlink("dir", scratch.path + "/link")
    let (recorder, _) = try walk(scratch.path, statsEveryEntry: true)
    #expect(recorder.kinds == ["dir": .directory, "dir/sub": .directory, "dir/sub/file": .file, "link": .symlink])
  }

  @Test func symlinksAreNeverFollowed() throws {
    let scratch = try Scratch()
    let outside = try Scratch()
    try outside.directory("secret")
    try outside.file("secret/file")
    try scratch.directory("inside")
    symlink(outside.path, scratch.path + "/inside/link")
    symlink(outside.path + "/secret", scratch.path + "/dirlink")
    for statsEveryEntry in [false, true] {
      let (recorder, _) = try walk(scratch.path, statsEveryEntry: statsEveryEntry)
      #expect(Set(recorder.seen) == ["inside", "inside/link", "dirlink"])
      #expect(recorder.kinds["dirlink"] == .symlink && recorder.failures.isEmpty)
    }
  }

  @Test func aPrunedSubtreeIsNotWalked() throws {
    let scratch = try Scratch()
    try scratch.directory("keep/deeper")
    try scratch.directory("skip/deeper")
    try scratch.file("skip/deeper/file")
    let (recorder, _) = try walk(scratch.path, visitor: Recorder(pruned: ["skip"]))
    #expect(Set(recorder.seen) == ["keep", "keep/deeper", "skip"])
  }

  @Test func aDirectoryThatCannotBeOpenedIsReportedAndTheWalkGoesOn() throws {
    let scratch = try Scratch()
    try scratch.directory("gone")
    for d in 0..<20 {
      try scratch.directory("d\(d)")
      try scratch.file("d\(d)/f")
    }
    let (recorder, stopped) = try walk(scratch.path, visitor: Recorder(vanishing: ["gone"]))
    #expect(!stopped)
    #expect(recorder.failures.count == 1 && recorder.failures.first?.errno == ENOENT)
    #expect(recorder.seen.count == 41)
  }

  @Test func aVisitorCanStopTheWalk() throws {
    let scratch = try Scratch()
    try scratch.directory("a/b/c")
    let (recorder, stopped) = try walk(scratch.path, threads: 1, visitor: Recorder(stopAt: "b"))
    #expect(stopped && recorder.seen == ["a", "a/b"])
  }

  @Test func postOrderLeavesEachDirectoryAfterEverythingBelowIt() throws {
    let scratch = try Scratch()
    for d in 0..<10 { try scratch.directory("d\(d)/x/y") }
    let expected = Set([""] + (0..<10).flatMap { ["d\($0)", "d\($0)/x", "d\($0)/x/y"] })
    // With several threads each directory is left once; with one, the order is checked too.
    let (parallel, _) = try walk(scratch.path, threads: 4, visitor: Recorder(), postOrder: true)
    #expect(parallel.left.count == 31 && Set(parallel.left) == expected)
    let (serial, _) = try walk(scratch.path, threads: 1, visitor: Recorder(), postOrder: true)
    #expect(serial.left.count == 31 && serial.left.last == "")
    for d in 0..<10 {
      let order = ["d\(d)/x/y", "d\(d)/x", "d\(d)"].map { serial.left.firstIndex(of: $0)! }
      #expect(order == order.sorted())
    }
  }

  @Test func removeTreeAndCopyWalkWholeTrees() throws {
    let scratch = try Scratch()
    for d in 0..<5 {
      try scratch.directory("tree/d\(d)/e")
      try scratch.file("tree/d\(d)/e/f")
    }
    symlink("d0", scratch.path + "/tree/link")
    let root = try DirectoryHandle(path: scratch.path)
    try root.setProtectionClass(.complete, of: "tree")
    try ItemCopier.copy("tree", in: root, to: "copy", in: root)
    let (copied, _) = try walk(scratch.path + "/copy")
    let (original, _) = try walk(scratch.path + "/tree")
    #expect(Set(copied.seen) == Set(original.seen) && copied.kinds["link"] == .symlink)
    #expect(try root.protectionClass(of: "copy") == .complete)
    try root.removeTree("copy")
    try root.removeTree("tree")
    #expect(try root.entries().isEmpty)
  }
}

/// Calls `access(2)` through `valueOrErrno` on every entry and counts the calls that failed.
private struct AccessProbe: TreeVisitor {
  /// Makes sure both walking threads take part: the first to enter a subdirectory waits (at most
  /// 10 s) until another thread has entered one too.
  final class Rendezvous: Sendable {
    let threads = Mutex<Set<UInt64>>([])
    let bothIn = DispatchSemaphore(value: 0)

    func arrive() {
      let id = UInt64(pthread_self())
      let count = threads.withLock {
        $0.insert(id); return $0.count
      }
      if count == 1 {
        _ = bothIn.wait(timeout: .now() + 10)
      } else if count == 2 {
        bothIn.signal()
      }
    }
  }

  let rendezvous: Rendezvous
  var visits = 0
  var failures = 0

  mutating func enter(_ directory: DirectoryHandle, _ context: Int) {
    if context > 0 { rendezvous.arrive() }
  }

  mutating func visit(_ entry: inout TreeEntry, in context: Int) -> TreeStep<Int> {
    visits += 1
    let directory = entry.directory.fd
    if case .failure = valueOrErrno(.access, { faccessat(directory, entry.name, F_OK, AT_SYMLINK_NOFOLLOW) }) {
      failures += 1
    }
    return .descend(context + 1)
  }

  mutating func failed(_ error: ProtFSError, in context: Int) -> Bool { true }
}

@Suite struct TreeWalkerFaultTests {
  @Test func theWalkingThreadsSeeTheCallersPlannedFailures() throws {
    let t = try TestDevice()
    let root = t.path("tree")
    for d in 0..<64 {
      try FileManager.default.createDirectory(atPath: "\(root)/d\(d)", withIntermediateDirectories: true)
      for f in 0..<8 { try t.writeFile("\(root)/d\(d)/f\(f)") }
    }
    let entries = 64 * 9
    let faults = SyscallFaults()
    faults.fail(.access, with: EIO, times: entries)
    let (visitors, _) = try faults.during { () throws(ProtFSError) in
      TreeWalker(threads: 2).walk(
        [TreeWalker.Root(try DirectoryHandle(path: root), 0)],
        visitor: AccessProbe(rendezvous: AccessProbe.Rendezvous()))
    }
    #expect(visitors.map(\.visits).reduce(0, +) == entries)
    #expect(visitors.filter { $0.visits > 0 }.count == 2, "both threads walked")
    // Every call failed, whichever thread made it.
    #expect(visitors.map(\.failures).reduce(0, +) == entries)
    #expect(faults.injectedCount(.access) == entries)
  }
}
