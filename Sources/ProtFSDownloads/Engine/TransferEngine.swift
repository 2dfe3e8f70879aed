import CCurl
import Foundation
import ProtFSSystem
import Synchronization

/// Why the engine lets go of a task's transfer.
package enum StopReason: Sendable {
  case suspend
  case cancel
  case cancelProducingResumeData(@Sendable (Data?) -> Void)
}

/// What the engine thread is asked to do.
private enum EngineCommand: Sendable {
  case start(DownloadTask)
  case stop(DownloadTask, StopReason)
  case shutdown(DispatchSemaphore)
}

/// The transfer side of a session: one libcurl multi handle driven by one thread, which runs every
/// transfer of the session, reuses connections and holds each host to its connection limit.
///
/// The thread, the multi handle and libcurl itself come with the first command: a session that
/// only records tasks (`download --detach`) or reads them never loads libcurl, which is most of a
/// command's start-up.
///
/// `@unchecked Sendable`: only `commands` is shared (under its mutex); everything else is touched
/// by the engine thread alone.
package final class TransferEngine: @unchecked Sendable {
  /// The libcurl multi handle every transfer of the session runs in, made by the engine thread
  /// when it begins.
  package private(set) var multi: UnsafeMutableRawPointer!
  /// The commands not yet taken by the engine thread, whether the thread was started or shut
  /// down, and the multi handle that wakes it once the thread has made it.
  private struct Commands {
    var list: [EngineCommand] = []
    var started = false
    /// Set by the shutdown.
    var ended = false
    /// The multi handle's address (a pointer is not `Sendable`).
    var wakeup: Int?
  }
  private let commands = Mutex(Commands())
  /// Wakes the thread while it has no multi handle (libcurl could not be loaded).
  private let commandPosted = DispatchSemaphore(value: 0)
  // Unowned: the core owns this object and stops its thread before it goes away.
  unowned let core: DownloadSessionCore
  /// The session's configuration.
  package let configuration: DownloadSessionConfiguration

  /// The queued and retrying tasks, and the connections each host has.
  package let hosts: HostScheduler
  /// When failed attempts are tried again.
  package let retryPolicy: RetryPolicy
  /// The running transfers, by task id.
  package var active: [Int64: Transfer] = [:]
  /// Easy handles of finished transfers, reset and reused by the next ones.
  package var idleHandles: [UnsafeMutableRawPointer] = []
  /// Staging buffers of ended transfers, reused by the next ones.
  package let stagingBuffers: StagingBuffers
  /// New temp files the finisher makes ahead for the next transfers.
  package let temporaryFiles: TemporaryFileReserve
  /// When running transfers' progress was last written to the store.
  package var lastPersist = Monotonic.now
  /// When the access policy was last asked about running transfers.
  package var lastAccessCheck = Monotonic.now
  /// Tasks whose transfer the access policy paused (`.waitForUnlock` while writing), by temp directory.
  package var paused: [(directory: String, task: DownloadTask)] = []
  /// Temp directories opened for transfers, by path, with when they were opened or last found at
  /// their path. A transfer that starts within one access-check interval of that reuses the
  /// handle instead of opening the directory again (an open per file): the exposure is the one
  /// every running transfer already has, a directory moved between two checks.
  package var heldTemporaryDirectories: [String: (handle: DirectoryHandle, confirmed: UInt64)] = [:]
  /// Within one pass of `startReady()` (microseconds, one operation as a finisher batch is): the
  /// access policy's answer for each temp directory and the labelling of its new files, shared by
  /// the pass's launches instead of asked and read again for each.
  /// Nil outside a pass.
  package var passDecisions: [String: DownloadAccessDecision]?
  package var passLabels: FileLabelsByDirectory?

  package init(core: DownloadSessionCore) {
    self.core = core
    configuration = core.configuration
    hosts = HostScheduler(connectionsPerHost: configuration.maximumConnectionsPerHost)
    retryPolicy = RetryPolicy(configuration)
    stagingBuffers = StagingBuffers(size: max(16 * 1024, min(configuration.receiveBufferSize, 10 << 20)))
    // Enough for the transfers that start between two of the finisher's batches (up to 4 ms
    // apart): small files from a fast server finish several per millisecond.
    temporaryFiles = TemporaryFileReserve(capacity: 64, freshness: configuration.accessCheckInterval)
  }

  // The multi handle outlives the thread: a late `post` may still wake it.
  deinit {
    if let multi { protfs_curl_multi_cleanup(multi) }
    for easy in idleHandles { protfs_curl_easy_cleanup(easy) }
  }

  /// Starts the engine thread (in debug builds, with the posting thread's planned syscall failures).
  private func startThread() {
    #if DEBUG
      let faults = SyscallFaults.current
      let thread = Thread { [self] in if let faults { faults.during { begin() } } else { begin() } }
    #else
      let thread = Thread { [self] in begin() }
    #endif
    thread.name = "protfs.download.engine"
    thread.start()
  }

  /// What `post` did with a command.
  private enum Posting {
    /// After a shutdown: nothing runs any more.
    case dropped
    /// A stop before anything ran: no transfer to let go of, the finisher settles it.
    case notRunning
    /// Queued for the thread, which is to be started or woken.
    case queued(start: Bool, wake: Bool, multi: Int?)
  }

  /// Hands `command` to the engine thread, starting the thread with the first command and waking
  /// it when it may be asleep. A stop or a shutdown before anything ran is done without the thread
  /// (there is nothing to let go of), and commands after a shutdown are dropped.
  private func post(_ command: EngineCommand) {
    let posting = commands.withLock { state -> Posting in
      guard !state.ended else { return .dropped }
      if case .stop = command, !state.started { return .notRunning }
      if case .shutdown = command {
        state.ended = true
        guard state.started else { return .dropped }
      }
      state.list.append(command)
      defer { state.started = true }
      // The thread takes every pending command at once: only the first one needs to wake it
      // (resuming 2,000 tasks costs one wakeup, not 2,000).
      return .queued(start: !state.started, wake: state.list.count == 1, multi: state.wakeup)
    }
    switch posting {
    case .dropped:
      if case .shutdown(let done) = command { done.signal() }
    case .notRunning:
      if case .stop(let task, let reason) = command { core.finisher.post(.stop(task, reason)) }
    case .queued(let start, let wake, let multi):
      if start { startThread() }
      guard wake else { return }
      if let multi, let handle = UnsafeMutableRawPointer(bitPattern: multi) {
        protfs_curl_multi_wakeup(handle)
      } else {
        commandPosted.signal()
      }
    }
  }

  /// Queues `task` for transfer.
  package func enqueue(_ task: DownloadTask) { post(.start(task)) }

  /// Loads libcurl now instead of on the first transfer's engine thread: for a process that exists
  /// to transfer (the session service), whose first download should not wait for the library and
  /// the forty it links. A failure is left for the transfers to report, each with the reason.
  package static func loadLibcurl() { _ = protfs_curl_load() }

  /// Lets go of `task`'s transfer; the finisher settles it.
  package func stop(_ task: DownloadTask, _ reason: StopReason) { post(.stop(task, reason)) }

  /// Stops every transfer, keeping temp files and progress for a later reattach, and waits for the
  /// thread to end.
  package func shutdown() {
    let done = DispatchSemaphore(value: 0)
    post(.shutdown(done))
    done.wait()
  }

  // MARK: The engine thread

  /// The engine thread's start: libcurl loaded and the multi handle made, then `run()`; or, when
  /// libcurl cannot be loaded, every task fails saying so.
  private func begin() {
    if let failure = protfs_curl_load() {
      failWithoutLibcurl(.libcurlUnavailable(String(cString: failure)))
      return
    }
    // curl_multi_init only fails when out of memory.
    let multi = protfs_curl_multi_init()!
    let perHost = max(1, configuration.maximumConnectionsPerHost)
    protfs_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, perHost)
    protfs_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(16, perHost * 4))
    self.multi = multi
    let address = Int(bitPattern: multi)
    commands.withLock { $0.wakeup = address }
    run()
  }

  /// Without libcurl: each task handed over fails with `error` (its temp file, if any, kept), a
  /// stop is settled as usual, and the thread ends at shutdown.
  private func failWithoutLibcurl(_ error: ProtFSError) {
    while true {
      for command in takeCommands() {
        switch command {
        case .start(let task): fail(task, error, deleting: nil)
        case .stop(let task, let reason): core.finisher.post(.stop(task, reason))
        case .shutdown(let done):
          done.signal()
          return
        }
      }
      commandPosted.wait()
    }
  }

  /// Takes every pending command.
  private func takeCommands() -> [EngineCommand] {
    commands.withLock { state in
      let taken = state.list
      state.list.removeAll(keepingCapacity: true)
      return taken
    }
  }

  /// The engine thread: commands, launches, libcurl, then the periodic checks, until shutdown.
  private func run() {
    var running: Int32 = 0
    // The queued count last told to `temporaryFiles`.
    var told = 0
    while true {
      let pending = takeCommands()
      for command in pending {
        switch command {
        case .start(let task):
          if let wait = Self.waitBeforeBeginning(task) {
            hosts.retry(task, at: Monotonic.now + wait)
          } else {
            hosts.accept(task)
          }
        case .stop(let task, let reason): stopTransfer(of: task, reason)
        case .shutdown(let done):
          stopAll()
          done.signal()
          return
        }
      }
      startReady()
      protfs_curl_multi_perform(multi, &running)
      drainMessages()
      let now = Monotonic.now
      checkTimeouts(now)
      reportProgress(now)
      checkAccess(now)
      // Finished transfers freed connections: start the next ones now rather than after a poll
      // that may have no socket left to wake it.
      let launched = startReady()
      if active.isEmpty && hosts.isIdle {
        // Nothing left to start: the files made ahead are let go of.
        temporaryFiles.drain()
        told = 0
      } else if hosts.queued != told {
        told = hosts.queued
        temporaryFiles.expect(told)
      }
      protfs_curl_multi_poll(multi, nil, 0, launched ? 0 : pollTimeout(now), nil)
    }
  }

  /// Nanoseconds task `task` waits before it begins (its `earliestBeginDate`, on the wall clock,
  /// taken now onto the monotonic one); nil when it may begin now.
  private static func waitBeforeBeginning(_ task: DownloadTask) -> UInt64? {
    guard let begin = task.runtime.withLock({ $0.record.earliestBegin }) else { return nil }
    let seconds = begin - Date().timeIntervalSince1970
    guard seconds > 0 else { return nil }
    // A century at most, so that the deadline cannot overflow.
    return UInt64(min(seconds, 100 * 365 * 86_400) * 1e9)
  }

  /// Launches queued tasks while their hosts have free connections, and due retries; returns
  /// whether it launched any.
  @discardableResult
  package func startReady() -> Bool {
    passDecisions = [:]
    passLabels = FileLabelsByDirectory()
    defer {
      passDecisions = nil
      passLabels = nil
    }
    return hosts.startReady { task, key in launch(task, hostKey: key) }
  }

  /// How long the thread may sleep in `curl_multi_poll`, in milliseconds.
  private func pollTimeout(_ now: UInt64) -> Int32 {
    var timeout: Int = 100  // the idle-timeout and progress checks need a tick even when curl has none
    var curlTimeout: Int = -1
    protfs_curl_multi_timeout(multi, &curlTimeout)
    if curlTimeout >= 0 { timeout = min(timeout, curlTimeout) }
    timeout = hosts.timeout(timeout, now: now)
    return Int32(max(0, timeout))
  }

  // MARK: Detaching, retrying, failing

  /// Writes what the transfer staged, takes it out of libcurl and returns its handle and buffer to
  /// the pools; the fd stays open.
  package func detach(_ transfer: Transfer, writingStagedBytes: Bool = true) {
    if writingStagedBytes {
      transfer.flush()
      transfer.returnStaging()
    }
    hosts.forget(transfer.task.id)
    protfs_curl_multi_remove_handle(multi, transfer.easy)
    protfs_curl_easy_reset(transfer.easy)
    idleHandles.append(transfer.easy)
    active[transfer.task.id] = nil
    hosts.closed(transfer.hostKey)
    let position = transfer.position
    transfer.task.runtime.withLock { $0.record.bytesReceived = position }
  }

  /// Ends the attempts libcurl reports done.
  private func drainMessages() {
    var left: Int32 = 0
    while let message = protfs_curl_multi_info_read(multi, &left) {
      guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
      var context: UnsafeMutableRawPointer?
      protfs_curl_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &context)
      guard let context else { continue }
      let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
      finishAttempt(transfer, result: protfs_curlmsg_result(message))
    }
  }

  /// Schedules another attempt after the backoff delay, or fails the task when retries are used up.
  package func retry(_ task: DownloadTask, because error: ProtFSError) {
    let attempts = task.runtime.withLock { $0.attempts }
    guard let delay = retryPolicy.delay(afterAttempts: attempts) else {
      fail(
        task, RetryPolicy.gaveUp(error, after: attempts),
        deleting: TemporaryRemoval(task, in: configuration.fileSystem))
      return
    }
    hosts.retry(task, at: Monotonic.now + delay)
  }

  /// Fails the task of `t` for good, closing and deleting its temp file (an unnamed one goes with
  /// its descriptor: it is never named, so nothing is made in a directory that may have left the
  /// device).
  package func fail(_ t: Transfer, _ error: ProtFSError) {
    let named = t.isNamed
    t.file.close()
    fail(t.task, error, deleting: TemporaryRemoval(directory: named ? t.directory : nil, name: t.temporaryFileName))
  }

  /// Fails `task` for good; the finisher deletes `removal`, if any, and settles it.
  package func fail(_ task: DownloadTask, _ error: ProtFSError, deleting removal: TemporaryRemoval?) {
    hosts.forget(task.id)
    core.finisher.post(.fail(task, error, deleting: removal))
  }

  // MARK: Stopping

  /// Takes `task` out of the engine, wherever it is, and has the finisher settle it.
  private func stopTransfer(of task: DownloadTask, _ reason: StopReason) {
    if let transfer = active[task.id] {
      detach(transfer)
      transfer.closeKeepingFile()
    } else if hosts.isKnown(task.id) {
      hosts.withdraw(task)
      paused.removeAll { $0.task === task }
    }
    hosts.forget(task.id)
    core.finisher.post(.stop(task, reason))
  }

  /// Session shutdown: every transfer stops where it is, still `running` in the store, so that the
  /// next session with this identifier picks it up.
  private func stopAll() {
    for transfer in Array(active.values) {
      detach(transfer)
      transfer.closeKeepingFile()
    }
    temporaryFiles.drain()
    hosts.removeAll()
    paused.removeAll()
  }
}

extension ProtFSError {
  /// The error of every transfer when libcurl cannot be loaded; `reason` is the loader's message.
  static func libcurlUnavailable(_ reason: String) -> ProtFSError {
    ProtFSError(
      .io, "Cannot transfer anything: libcurl cannot be loaded (\(reason)).",
      remedy: .advice("install Debian's libcurl4 package (scripts/setup.sh does), then run the transfer again"))
  }
}
