import Foundation
import ProtFS
import ProtFSSystem

/// A change of protected-data availability, as iOS posts it (docs/semantics.md §3).
public struct ProtectedDataEvent: Sendable, Codable, Equatable {
  /// The two notifications.
  public enum Kind: String, Sendable, Codable {
    /// Posted before data becomes unavailable (a lock or reboot starts).
    case protectedDataWillBecomeUnavailable
    /// Posted after data became available (an unlock finished, or the passcode was removed).
    case protectedDataDidBecomeAvailable
  }

  /// Which notification.
  public var event: Kind
  /// The lock state the device is going to (will-) or is in (did-).
  public var state: LockState
  /// When the change was made (a transition committing it), or when protfs noticed it.
  public var time: Date
}

extension Device {
  /// The protected-data notifications of this device, from any process, until the stream is dropped.
  ///
  /// Watches `.protfs/` with inotify: the transition journal appearing is the "will become
  /// unavailable" moment (files are about to lose their bits); the state file being replaced
  /// with an available state is "did become available".
  public func protectedDataEvents() throws(ProtFSError) -> AsyncStream<ProtectedDataEvent> {
    try requireInitialized()
    // Owned from the start: a failure below closes what is open so far.
    let inotify = FileDescriptor(
      owning: try Kernel.inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK)).orThrow(
        "watch", path: stateDirectory))
    let mask = UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE)
    if case .failure(let e) = Kernel.inotify_add_watch(inotify.rawValue, stateDirectory, mask) {
      throw ProtFSError.system("watch", path: stateDirectory, errno: e)
    }
    let (wakeRead, wakeWrite) = try FileDescriptor.pipe().orThrow("watch", path: stateDirectory)
    let store = try LockStore(self)
    let initial = try store.record(now: Date())
    let (stream, continuation) = AsyncStream<ProtectedDataEvent>.makeStream()
    let watcher = EventWatcher(
      store: store, inotify: inotify, wakeRead: wakeRead, wakeWrite: wakeWrite, initial: initial,
      continuation: continuation)
    // Runs when the stream is dropped, or once the thread finished it; the thread has closed the
    // pipe by then, and a write to a closed `FileDescriptor` goes nowhere (never to a new file of
    // the same number).
    continuation.onTermination = { _ in
      var byte: UInt8 = 1
      _ = Kernel.write(wakeWrite.rawValue, &byte, 1)
    }
    let thread = Thread { watcher.run() }
    thread.start()
    return stream
  }
}

/// The thread behind `protectedDataEvents()`.
///
/// `@unchecked Sendable`: `available` and `generation` are touched only by the watching thread (or
/// by a test driving `catchUp` without it); the rest is immutable.
package final class EventWatcher: @unchecked Sendable {
  /// The device's lock store, read on each change.
  package let store: LockStore
  /// The inotify instance watching `.protfs/`.
  package let inotify: FileDescriptor
  /// The read end of the pipe that wakes the thread when the stream is dropped.
  package let wakeRead: FileDescriptor
  /// Its write end.
  package let wakeWrite: FileDescriptor
  package var available: Bool
  /// The generation of the newest committed record seen.
  package var generation: Int
  package let continuation: AsyncStream<ProtectedDataEvent>.Continuation

  /// A watcher owning `inotify` and the wake pipe's ends (closed when it stops).
  package init(
    store: LockStore, inotify: FileDescriptor, wakeRead: FileDescriptor, wakeWrite: FileDescriptor,
    initial: LockRecord, continuation: AsyncStream<ProtectedDataEvent>.Continuation
  ) {
    self.store = store
    self.inotify = inotify
    self.wakeRead = wakeRead
    self.wakeWrite = wakeWrite
    self.available = initial.protection.isProtectedDataAvailable
    self.generation = initial.generation
    self.continuation = continuation
  }

  /// Posts what happened since the last wake-up. The committed record comes first: its log holds
  /// every availability change of transitions this watcher slept through, and its state settles
  /// what a rolled-back transition announced. A journal then announces a transition in progress.
  package func catchUp(stateChanged: Bool, journalChanged: Bool) {
    if stateChanged, let record = try? store.record(now: Date()) {
      for change in record.availabilityChanges ?? [] where change.generation > generation {
        post(available: change.available, state: change.state, time: change.time)
      }
      generation = max(generation, record.generation)
      post(available: record.protection.isProtectedDataAvailable, state: record.state, time: Date())
    }
    if journalChanged, let journal = try? store.journal(), journal.next.generation > generation,
      !journal.next.protection.isProtectedDataAvailable
    {
      post(available: false, state: journal.next.state, time: Date())
    }
  }

  /// Posts the notification for a change to `available`, unless it is the availability last posted.
  private func post(available now: Bool, state: LockState, time: Date) {
    guard now != available else { return }
    available = now
    continuation.yield(
      .init(
        event: now ? .protectedDataDidBecomeAvailable : .protectedDataWillBecomeUnavailable, state: state, time: time))
  }

  package func run() {
    defer {
      inotify.close()
      wakeRead.close()
      wakeWrite.close()
      continuation.finish()
    }
    let inotify = inotify.rawValue
    let wakeRead = wakeRead.rawValue
    var buffer = [UInt8](repeating: 0, count: 16 << 10)
    while true {
      var fds = [
        pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
      ]
      // Kernel.poll retries EINTR; any other failure ends the watch.
      guard case .success = Kernel.poll(&fds, 2, -1), fds[1].revents == 0 else { return }
      let count = buffer.withUnsafeMutableBytes { raw in
        (try? Kernel.read(inotify, raw.baseAddress, raw.count).get()) ?? -1
      }
      guard count > 0 else { continue }
      var names: Set<String> = []
      buffer.withUnsafeBytes { raw in
        var offset = 0
        while offset < count {
          let event = InotifyEvent(raw.baseAddress! + offset)
          if let name = event.name { names.insert(name) }
          offset += event.size
        }
      }
      catchUp(
        stateChanged: names.contains(LockStore.stateFileName), journalChanged: names.contains(LockStore.journalFileName)
      )
    }
  }
}
