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

/// libcurl's one-time global setup, which is not thread-safe and must run before any handle exists.
private let curlGlobalSetup: Void = {
  curl_global_init(Int(CURL_GLOBAL_ALL))
}()

/// The transfer side of a session: one libcurl multi handle driven by one thread, which runs every
/// transfer of the session, reuses connections and holds each host to its connection limit.
///
/// `@unchecked Sendable`: only `commands` is shared (under its mutex); everything else is touched by
/// the engine thread alone.
package final class TransferEngine: @unchecked Sendable {
  /// The libcurl multi handle every transfer of the session runs in.
  package let multi: UnsafeMutableRawPointer
  private let commands = Mutex<[EngineCommand]>([])
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
  /// Staging buffers of finished transfers, reused by the next ones.
  package var idleBuffers: [UnsafeMutableRawBufferPointer] = []
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

  package init(core: DownloadSessionCore) {
    _ = curlGlobalSetup
    self.core = core
    configuration = core.configuration
    hosts = HostScheduler(connectionsPerHost: configuration.maximumConnectionsPerHost)
    retryPolicy = RetryPolicy(configuration)
    // curl_multi_init only fails when out of memory.
    multi = curl_multi_init()!
    let perHost = max(1, configuration.maximumConnectionsPerHost)
    protfs_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, perHost)
    protfs_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(16, perHost * 4))
  }

  // The multi handle outlives the thread: a late `post` may still wake it.
  deinit {
    curl_multi_cleanup(multi)
    for easy in idleHandles { curl_easy_cleanup(easy) }
    for buffer in idleBuffers { buffer.deallocate() }
  }

  /// Starts the engine thread (in debug builds, with the starting thread's planned syscall failures).
  package func start() {
    #if DEBUG
      let faults = SyscallFaults.current
      let thread = Thread { [self] in if let faults { faults.during { run() } } else { run() } }
    #else
      let thread = Thread { [self] in run() }
    #endif
    thread.name = "protfs.download.engine"
    thread.start()
  }

  /// Hands `command` to the engine thread, waking it if it was idle.
  private func post(_ command: EngineCommand) {
    // The thread takes every pending command at once: only the first one needs to wake it
    // (resuming 2,000 tasks costs one wakeup, not 2,000).
    let wasEmpty = commands.withLock { list in
      list.append(command)
      return list.count == 1
    }
    if wasEmpty { curl_multi_wakeup(multi) }
  }

  /// Queues `task` for transfer.
  package func enqueue(_ task: DownloadTask) { post(.start(task)) }

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

  /// The engine thread: commands, launches, libcurl, then the periodic checks, until shutdown.
  private func run() {
    var running: Int32 = 0
    while true {
      let pending = commands.withLock { list in
        let taken = list
        list.removeAll(keepingCapacity: true)
        return taken
      }
      for command in pending {
        switch command {
        case .start(let task): hosts.accept(task)
        case .stop(let task, let reason): stopTransfer(of: task, reason)
        case .shutdown(let done):
          stopAll()
          done.signal()
          return
        }
      }
      startReady()
      curl_multi_perform(multi, &running)
      drainMessages()
      let now = Monotonic.now
      checkTimeouts(now)
      reportProgress(now)
      checkAccess(now)
      // Finished transfers freed connections: start the next ones now rather than after a poll
      // that may have no socket left to wake it.
      let launched = startReady()
      curl_multi_poll(multi, nil, 0, launched ? 0 : pollTimeout(now), nil)
    }
  }

  /// Launches queued tasks while their hosts have free connections, and due retries; returns
  /// whether it launched any.
  @discardableResult
  package func startReady() -> Bool {
    hosts.startReady { task, key in launch(task, hostKey: key) }
  }

  /// How long the thread may sleep in `curl_multi_poll`, in milliseconds.
  private func pollTimeout(_ now: UInt64) -> Int32 {
    var timeout: Int = 100  // the idle-timeout and progress checks need a tick even when curl has none
    var curlTimeout: Int = -1
    curl_multi_timeout(multi, &curlTimeout)
    if curlTimeout >= 0 { timeout = min(timeout, curlTimeout) }
    timeout = hosts.timeout(timeout, now: now)
    return Int32(max(0, timeout))
  }

  // MARK: Detaching, retrying, failing

  /// Writes what the transfer staged, takes it out of libcurl and returns its handle and buffer to
  /// the pools; the fd stays open.
  package func detach(_ transfer: Transfer) {
    transfer.flush()
    idleBuffers.append(transfer.staging)
    hosts.forget(transfer.task.id)
    curl_multi_remove_handle(multi, transfer.easy)
    curl_easy_reset(transfer.easy)
    idleHandles.append(transfer.easy)
    active[transfer.task.id] = nil
    hosts.closed(transfer.hostKey)
    let position = transfer.position
    transfer.task.runtime.withLock { $0.record.bytesReceived = position }
  }

  /// Ends the attempts libcurl reports done.
  private func drainMessages() {
    var left: Int32 = 0
    while let message = curl_multi_info_read(multi, &left) {
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

  /// Fails the task of `t` for good, closing and deleting its temp file.
  package func fail(_ t: Transfer, _ error: ProtFSError) {
    t.file.close()
    fail(t.task, error, deleting: TemporaryRemoval(directory: t.directory, name: t.temporaryFileName))
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
      transfer.file.close()
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
      transfer.file.close()
    }
    hosts.removeAll()
    paused.removeAll()
  }
}
