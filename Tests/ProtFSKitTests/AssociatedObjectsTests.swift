import Foundation
import ProtFSKit
import ProtFSTestSupport
import Synchronization
import Testing

/// The keys, as iOS code declares them: the addresses of variables of its own.
nonisolated(unsafe) private var progressKey: UInt8 = 0
nonisolated(unsafe) private var nameKey: UInt8 = 0

/// A stored property in an extension, as download managers add one to `URLSessionTask`.
extension NSObject {
  fileprivate var trackedName: String? {
    get { objc_getAssociatedObject(self, &nameKey) as? String }
    set { objc_setAssociatedObject(self, &nameKey, newValue, .OBJC_ASSOCIATION_RETAIN_NONATOMIC) }
  }
}

/// Associated objects as the Objective-C runtime keeps them: a value per object and key, held as
/// the policy says, released after the object ends, from any thread.
@Suite(.timeLimit(.minutes(1))) struct AssociatedObjectsTests {
  /// A value that says when it ends.
  final class Tracker: @unchecked Sendable {
    let ended: DispatchSemaphore
    init(_ ended: DispatchSemaphore) { self.ended = ended }
    deinit { ended.signal() }
  }

  /// Each object has its own values, per key; setting replaces, nil removes, and
  /// `objc_removeAssociatedObjects` removes them all.
  @Test func valuesArePerObjectAndKey() {
    let first = NSObject()
    let second = NSObject()
    first.trackedName = "first"
    second.trackedName = "second"
    objc_setAssociatedObject(first, &progressKey, 0.5, .OBJC_ASSOCIATION_RETAIN)
    #expect(first.trackedName == "first")
    #expect(second.trackedName == "second")
    #expect(objc_getAssociatedObject(first, &progressKey) as? Double == 0.5)
    #expect(objc_getAssociatedObject(second, &progressKey) == nil)
    first.trackedName = "renamed"
    #expect(first.trackedName == "renamed")
    first.trackedName = nil
    #expect(first.trackedName == nil)
    objc_removeAssociatedObjects(first)
    #expect(objc_getAssociatedObject(first, &progressKey) == nil)
    #expect(second.trackedName == "second")
  }

  /// A retained value is released once its object ends, without another call, and a replaced one
  /// at once.
  @Test func valuesAreReleasedWhenTheirObjectEnds() async {
    let ended = DispatchSemaphore(value: 0)
    let replaced = DispatchSemaphore(value: 0)
    do {
      let owner = NSObject()
      objc_setAssociatedObject(owner, &progressKey, Tracker(replaced), .OBJC_ASSOCIATION_RETAIN_NONATOMIC)
      objc_setAssociatedObject(owner, &progressKey, Tracker(ended), .OBJC_ASSOCIATION_RETAIN_NONATOMIC)
      #expect(replaced.wait(timeout: .now()) == .success)
      #expect(ended.wait(timeout: .now()) == .timedOut)
      #expect(objc_getAssociatedObject(owner, &progressKey) is Tracker)
    }
    let released = await offPool { ended.wait(timeout: .now() + 10) }
    #expect(released == .success)
  }

  /// `ASSIGN` does not retain: the value reads as nil once it ended, never as a dangling one.
  /// `COPY` keeps a copy, which later changes to the original do not reach.
  @Test func assignDoesNotRetainAndCopyCopies() {
    let owner = NSObject()
    let ended = DispatchSemaphore(value: 0)
    do {
      let value = Tracker(ended)
      objc_setAssociatedObject(owner, &progressKey, value, .OBJC_ASSOCIATION_ASSIGN)
      #expect(objc_getAssociatedObject(owner, &progressKey) as? Tracker === value)
    }
    #expect(ended.wait(timeout: .now()) == .success)
    #expect(objc_getAssociatedObject(owner, &progressKey) == nil)
    let name = NSMutableString(string: "draft")
    objc_setAssociatedObject(owner, &nameKey, name, .OBJC_ASSOCIATION_COPY)
    name.append(" changed")
    #expect((objc_getAssociatedObject(owner, &nameKey) as? NSString) == "draft")
  }

  /// A value type has no identity to keep values for: nothing is kept, as its box on Apple's
  /// platforms ends at once.
  @Test func aValueTypeKeepsNothing() {
    let point = CGPoint(x: 1, y: 2)
    objc_setAssociatedObject(point, &progressKey, "lost", .OBJC_ASSOCIATION_RETAIN)
    #expect(objc_getAssociatedObject(point, &progressKey) == nil)
  }

  /// Counts the `Counted` values that ended, and says when all of them did.
  final class Endings: Sendable {
    let count = Atomic(0)
    let all = DispatchSemaphore(value: 0)
    let expected: Int
    init(expected: Int) { self.expected = expected }
  }

  /// A value that counts its end.
  final class Counted: Sendable {
    let endings: Endings
    init(_ endings: Endings) { self.endings = endings }
    deinit {
      if endings.count.add(1, ordering: .relaxed).newValue == endings.expected { endings.all.signal() }
    }
  }

  /// Many threads setting and reading values of shared objects and of their own at once: each reads
  /// what it set, and the values of the objects that ended are all released.
  @Test func threadsSetAndReadAtOnce() async {
    let threads = 8
    let rounds = 2_000
    let shared = (0..<threads).map { _ in NSObject() }
    let endings = Endings(expected: threads * rounds)
    let mismatches = Atomic(0)
    nonisolated(unsafe) let objects = shared
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
      for round in 0..<rounds {
        let own = NSObject()
        own.trackedName = "\(thread)-\(round)"
        if own.trackedName != "\(thread)-\(round)" { mismatches.add(1, ordering: .relaxed) }
        objc_setAssociatedObject(own, &progressKey, Counted(endings), .OBJC_ASSOCIATION_RETAIN)
        let object = objects[(thread + round) % objects.count]
        object.trackedName = "\(thread)"
        _ = object.trackedName
      }
    }
    #expect(mismatches.load(ordering: .relaxed) == 0)
    let released = await offPool { endings.all.wait(timeout: .now() + 10) }
    #expect(released == .success)
    #expect(endings.count.load(ordering: .relaxed) == threads * rounds)
    withExtendedLifetime(shared) {}
  }
}
