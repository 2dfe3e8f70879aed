import Foundation
import ProtFSLock
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFS

/// The watcher's catching up, driven by hand: what it posts when it wakes after transitions it
/// did not see one by one (a busy machine delivers their inotify events in one read).
@Suite struct ProtectedDataEventsTests {
  /// A watcher of `device` as `protectedDataEvents()` starts it, without its thread.
  private static func watcher(of device: Device) throws -> (EventWatcher, AsyncStream<ProtectedDataEvent>) {
    let store = try LockStore(device)
    let (stream, continuation) = AsyncStream<ProtectedDataEvent>.makeStream()
    let watcher = EventWatcher(
      store: store, inotify: FileDescriptor(owning: -1), wakeRead: FileDescriptor(owning: -1),
      wakeWrite: FileDescriptor(owning: -1), initial: try store.record(now: Date()),
      continuation: continuation)
    return (watcher, stream)
  }

  private static func drain(
    _ watcher: EventWatcher, _ stream: AsyncStream<ProtectedDataEvent>
  ) async -> [ProtectedDataEvent] {
    watcher.continuation.finish()
    var events: [ProtectedDataEvent] = []
    for await event in stream { events.append(event) }
    return events
  }

  @Test func transitionsSleptThroughArePostedInOrder() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let (watcher, stream) = try Self.watcher(of: t.device)
    let controller = LockController(device: t.device)
    try controller.lock()
    try controller.reboot()  // still unavailable: no event
    try controller.unlock()
    watcher.catchUp(stateChanged: true, journalChanged: true)
    let events = await Self.drain(watcher, stream)
    #expect(events.map(\.event) == [.protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable])
    #expect(events.map(\.state) == [.locked, .unlocked])
    #expect(events[0].time <= events[1].time)
  }

  @Test func aJournalAnnouncesOnceAndARollbackIsUndone() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let (watcher, stream) = try Self.watcher(of: t.device)
    let store = try LockStore(t.device)
    let current = try store.record(now: Date())
    var next = current
    next.state = .locked
    next.generation += 1
    next.logAvailabilityChange(from: current, at: Date())
    try store.write(TransitionJournal(operation: "lock", previous: current, next: next, pid: getpid(), started: Date()))
    watcher.catchUp(stateChanged: false, journalChanged: true)
    watcher.catchUp(stateChanged: false, journalChanged: true)  // the same journal again: nothing new
    // The lock failed and was rolled back: the previous record is written again.
    try store.write(current)
    try store.removeJournal()
    watcher.catchUp(stateChanged: true, journalChanged: true)
    let events = await Self.drain(watcher, stream)
    #expect(events.map(\.event) == [.protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable])
  }

  @Test func theLogKeepsTheLatestChangesAndTheWatcherEndsConsistent() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let (watcher, stream) = try Self.watcher(of: t.device)
    let controller = LockController(device: t.device)
    for _ in 0..<20 {
      try controller.lock()
      try controller.unlock()
    }
    try controller.lock()
    let record = try controller.record()
    #expect(record.availabilityChanges?.count == LockRecord.availabilityLogLimit)
    #expect(record.availabilityChanges?.last?.generation == record.generation)
    watcher.catchUp(stateChanged: true, journalChanged: false)
    let events = await Self.drain(watcher, stream)
    // 41 changes, of which the log holds the last 32; the oldest of those is a "did become
    // available" that the watcher, which last saw the device unlocked, has nothing to post for.
    // The rest alternate and end with the device's state.
    #expect(events.count == LockRecord.availabilityLogLimit - 1)
    #expect(events.first?.event == .protectedDataWillBecomeUnavailable)
    #expect(events.last?.event == .protectedDataWillBecomeUnavailable)
    for (a, b) in zip(events, events.dropFirst()) { #expect(a.event != b.event) }
  }
}
