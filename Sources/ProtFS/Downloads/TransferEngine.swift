import CCurl
import Foundation
import Synchronization

/// Why the engine lets go of a task's transfer.
enum StopReason: Sendable {
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
final class TransferEngine: @unchecked Sendable {
  private let multi: UnsafeMutableRawPointer
  private let commands = Mutex<[EngineCommand]>([])
  // Unowned: the core owns this object and stops its thread before it goes away.
  private unowned let core: DownloadSessionCore
  private let configuration: DownloadSessionConfiguration

  /// Tasks waiting for a connection, per host, in the order they were resumed.
  private var queues: [String: HostQueue] = [:]
  private var hostOrder: [String] = []
  /// Ids of the tasks queued, retrying or active, so a second `resume()` is a no-op.
  private var known: Set<Int64> = []
  private var retrying: [(deadline: UInt64, task: DownloadTask)] = []
  private var active: [Int64: Transfer] = [:]
  private var activePerHost: [String: Int] = [:]
  private var idleHandles: [UnsafeMutableRawPointer] = []
  /// Staging buffers of finished transfers, reused by the next ones.
  private var idleBuffers: [UnsafeMutableRawBufferPointer] = []
  private var lastPersist = Monotonic.now
  private var lastAccessCheck = Monotonic.now
  /// Tasks whose transfer the access policy paused (`.waitForUnlock` while writing), by temp directory.
  private var paused: [(directory: String, task: DownloadTask)] = []
  /// Temp directories opened for transfers, by path, with when they were opened or last found at
  /// their path. A transfer that starts within one access-check interval of that reuses the
  /// handle instead of opening the directory again (an open per file): the exposure is the one
  /// every running transfer already has, a directory moved between two checks.
  private var heldTemporaryDirectories: [String: (handle: DirectoryHandle, confirmed: UInt64)] = [:]

  init(core: DownloadSessionCore) {
    _ = curlGlobalSetup
    self.core = core
    configuration = core.configuration
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

  /// Starts the engine thread.
  func start() {
    let thread = Thread { [self] in run() }
    thread.name = "protfs.download.engine"
    thread.start()
  }

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
  func enqueue(_ task: DownloadTask) { post(.start(task)) }

  /// Lets go of `task`'s transfer; the finisher settles it.
  func stop(_ task: DownloadTask, _ reason: StopReason) { post(.stop(task, reason)) }

  /// Stops every transfer, keeping temp files and progress for a later reattach, and waits for the
  /// thread to end.
  func shutdown() {
    let done = DispatchSemaphore(value: 0)
    post(.shutdown(done))
    done.wait()
  }

  // MARK: The engine thread

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
        case .start(let task): accept(task)
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

  private static func hostKey(_ url: URL) -> String {
    let scheme = url.scheme?.lowercased() ?? ""
    if scheme == "file" { return "file:" }
    return "\(scheme)://\(url.host?.lowercased() ?? ""):\(url.port ?? (scheme == "https" ? 443 : 80))"
  }

  private func accept(_ task: DownloadTask) {
    guard known.insert(task.id).inserted else { return }
    let key = Self.hostKey(task.url)
    if queues[key] == nil {
      hostOrder.append(key)
      queues[key] = HostQueue()
    }
    queues[key]!.append(task)
  }

  /// Launches queued tasks while their hosts have free connections, and due retries; returns
  /// whether it launched any.
  @discardableResult
  private func startReady() -> Bool {
    if !retrying.isEmpty {
      let now = Monotonic.now
      let due = retrying.filter { $0.deadline <= now }
      if !due.isEmpty {
        retrying.removeAll { $0.deadline <= now }
        for item in due {
          known.remove(item.task.id)
          accept(item.task)
        }
      }
    }
    guard !hostOrder.isEmpty else { return false }
    let limit = max(1, configuration.maximumConnectionsPerHost)
    var emptied = false
    var launched = false
    for key in hostOrder {
      while activePerHost[key, default: 0] < limit, let task = queues[key]!.popFirst() {
        launch(task, hostKey: key)
        launched = true
      }
      if queues[key]!.isEmpty { emptied = true }
    }
    if emptied {
      hostOrder.removeAll { queues[$0]!.isEmpty }
      queues = queues.filter { !$0.value.isEmpty }
    }
    return launched
  }

  private func pollTimeout(_ now: UInt64) -> Int32 {
    var timeout: Int = 100  // the idle-timeout and progress checks need a tick even when curl has none
    var curlTimeout: Int = -1
    curl_multi_timeout(multi, &curlTimeout)
    if curlTimeout >= 0 { timeout = min(timeout, curlTimeout) }
    for item in retrying {
      let wait = item.deadline > now ? Int((item.deadline - now) / 1_000_000) : 0
      timeout = min(timeout, wait)
    }
    return Int32(max(0, timeout))
  }

  // MARK: Launching an attempt

  private func launch(_ task: DownloadTask, hostKey: String) {
    let record = task.runtime.withLock { r in
      r.attempts += 1
      return r.record
    }
    guard record.state == .running else {
      known.remove(task.id)
      return
    }
    let url = task.url
    // The resource timeout runs from the task's creation, whichever process resumes it.
    let resourceLimit = Self.stored(record.resourceTimeout) ?? Monotonic.seconds(configuration.resourceTimeout)
    let deadline = record.createdAt + resourceLimit
    if Date().timeIntervalSince1970 > deadline {
      fail(
        task, Self.resourceTimedOut(url.absoluteString, limit: resourceLimit),
        deleting: TemporaryRemoval(task, in: configuration.fileSystem))
      return
    }
    let scheme = url.scheme?.lowercased() ?? ""
    guard ["http", "https", "file"].contains(scheme) else {
      let shown = url.scheme ?? ""
      fail(
        task,
        ProtFSError(
          .invalidArgument, "The URL '\(url.absoluteString)' uses the unsupported scheme '\(shown)'.",
          hint: "protfs downloads http, https and file URLs"), deleting: nil)
      return
    }
    if record.fileName == nil {
      do {
        let name = try DownloadFileName.fromURL(url)
        task.runtime.withLock { $0.record.fileName = name }
      } catch {
        fail(task, error, deleting: nil)
        return
      }
    }
    let directory = record.temporaryDirectory
    guard configuration.accessPolicy.canWriteTemp(in: directory) == .allow else {
      fail(
        task,
        ProtFSError(
          .protectedDataUnavailable,
          "Cannot write the temp file of '\(url.absoluteString)' in '\(directory)': Operation not permitted.",
          path: directory, errno: EPERM,
          hint:
            "the Downloads directory's protection class is not available while the device is locked; run `protfs init-cache` to give it NSFileProtectionNone"
        ), deleting: nil)
      return
    }
    // The directory is opened once, following no symlink, and held: the temp file is created,
    // written and later placed relative to it.
    let fileSystem = configuration.fileSystem
    let held: DirectoryHandle
    let opened: TemporaryFile.Opened
    do {
      held = try temporaryDirectory(directory)
      opened = try TemporaryFile.open(
        in: held, existingName: record.temporaryFileName,
        canContinue: record.entityTag != nil || record.lastModified != nil,
        label: { fd throws(ProtFSError) in try fileSystem.label(file: fd, for: held) })
    } catch {
      fail(task, error, deleting: nil)
      return
    }
    task.runtime.withLock { r in
      r.record.temporaryFileName = opened.name
      r.record.bytesReceived = opened.size
    }
    var digest: SHA256Digest?
    if record.expectedSHA256 != nil {
      let hasher = SHA256Digest()
      if opened.size > 0,
        let error = TemporaryFile.hashPrefix(
          fd: opened.file.rawValue, count: opened.size, into: hasher,
          path: held.pathOf(opened.name))
      {
        opened.file.close()
        fail(task, error, deleting: TemporaryRemoval(directory: held, name: opened.name))
        return
      }
      digest = hasher
    }
    let easy = idleHandles.popLast() ?? curl_easy_init()!
    let staging =
      idleBuffers.popLast()
      ?? UnsafeMutableRawBufferPointer.allocate(byteCount: receiveBufferSize, alignment: 4096)
    let transfer = Transfer(
      task: task, easy: easy, file: opened.file, temporaryDirectory: directory, directory: held,
      temporaryFileName: opened.name,
      offset: opened.size, isHTTP: scheme != "file", hostKey: hostKey, digest: digest, staging: staging,
      writesBehind: configuration.synchronizesFiles)
    transfer.requestLimit =
      Self.stored(record.requestTimeout).map { Monotonic.nanoseconds(seconds: $0) }
      ?? Monotonic.nanoseconds(configuration.requestTimeout)
    transfer.deadline = deadline
    configure(transfer, url: url, record: record)
    active[task.id] = transfer
    activePerHost[hostKey, default: 0] += 1
    curl_multi_add_handle(multi, easy)
  }

  private func configure(_ transfer: Transfer, url: URL, record: DownloadTaskRecord) {
    let easy = transfer.easy
    protfs_curl_easy_setopt_string(easy, CURLOPT_URL, url.absoluteString)
    let context = Unmanaged.passUnretained(transfer).toOpaque()
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, context)
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_WRITEFUNCTION, writeCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_HEADERFUNCTION, headerCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
    // The large receive buffer is what lets one write(2) carry up to a MiB (measured: 512 KiB to 10 MiB buffers halve a 1 GiB download's time).
    protfs_curl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, receiveBufferSize)
    protfs_curl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
    protfs_curl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, 20)
    protfs_curl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https,file")
    // A server must not redirect a download to a local file.
    protfs_curl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    protfs_curl_easy_setopt_long(
      easy, CURLOPT_CONNECTTIMEOUT_MS, Int(Monotonic.nanoseconds(configuration.connectTimeout) / 1_000_000))
    protfs_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
    protfs_curl_easy_setopt_string(easy, CURLOPT_USERAGENT, configuration.userAgent)
    if let bundle = configuration.trustedCertificatesPath {
      protfs_curl_easy_setopt_string(easy, CURLOPT_CAINFO, bundle)
    }
    if transfer.offset > 0 {
      protfs_curl_easy_setopt_string(easy, CURLOPT_RANGE, "\(transfer.offset)-")
      // If-Range needs a strong validator; a weak ETag falls back to Last-Modified.
      let validator = record.entityTag.flatMap { $0.hasPrefix("W/") ? nil : $0 } ?? record.lastModified
      if let validator, transfer.isHTTP {
        transfer.headerList = curl_slist_append(nil, "If-Range: \(validator)")
        protfs_curl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, transfer.headerList)
      }
    }
  }

  // MARK: Ending an attempt

  /// libcurl accepts 1 KiB to 10 MiB.
  private var receiveBufferSize: Int { max(16 * 1024, min(configuration.receiveBufferSize, 10 << 20)) }

  /// Writes what the transfer staged, takes it out of libcurl and returns its handle and buffer to
  /// the pools; the fd stays open.
  private func detach(_ transfer: Transfer) {
    transfer.flush()
    idleBuffers.append(transfer.staging)
    known.remove(transfer.task.id)
    curl_multi_remove_handle(multi, transfer.easy)
    curl_easy_reset(transfer.easy)
    idleHandles.append(transfer.easy)
    active[transfer.task.id] = nil
    activePerHost[transfer.hostKey, default: 1] -= 1
    let position = transfer.position
    transfer.task.runtime.withLock { $0.record.bytesReceived = position }
  }

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

  /// Forgets the validator, so that the retry asks for the whole entity again, and retries.
  private func restartFromZero(_ t: Transfer, because error: ProtFSError) {
    t.file.close()
    t.task.runtime.withLock { r in
      r.record.entityTag = nil
      r.record.lastModified = nil
    }
    retry(t.task, because: error)
  }

  private func finishAttempt(_ t: Transfer, result: CURLcode) {
    let url = t.task.url.absoluteString
    if result == CURLE_OK && !t.bodyStarted {
      // An empty body never reached the write callback: decide on the headers alone.
      t.bodyStarted = true
      _ = t.beginBody()
    }
    let code = t.isHTTP ? t.responseCode : 0
    let detail = t.curlErrorDetail ?? String(cString: curl_easy_strerror(result))
    detach(t)
    if let error = t.headerError {
      fail(t, error)
      return
    }
    if let e = t.writeErrno {
      var error = ProtFSError.system("write the temp file of '\(url)' at", path: t.temporaryPath, errno: e)
      if e == ENOSPC { error.hint = "free space on the device's filesystem, then download it again" }
      fail(t, error)
      return
    }
    if t.rangeMismatch {
      // The server sent another range than asked: forget the validator and start from byte 0.
      restartFromZero(t, because: ProtFSError(.network, "The server sent the wrong byte range for '\(url)'."))
      return
    }
    let status = t.refusedStatus ?? (t.isHTTP && result == CURLE_OK ? code : 200)
    if status == 416, t.offset > 0 {
      // A 416 for a range starting at the end of a complete file: there is nothing left to get.
      let total = t.contentRange.flatMap(ContentRange.init)?.total
      let announced = t.task.runtime.withLock { $0.record.bytesExpected }
      if announced >= 0 && announced != t.offset {
        // An earlier response announced more bytes than the entity has: its Content-Length lied.
        fail(
          t,
          ProtFSError(
            .network,
            "The server announced \(announced) bytes for '\(url)' but sent only \(t.offset) and says the file is complete.",
            hint: "the server's Content-Length is wrong; nothing was kept"))
        return
      }
      if total == nil || total == t.offset {
        t.task.runtime.withLock { $0.record.bytesExpected = t.offset }
        core.finisher.post(.complete(t))
        return
      }
      restartFromZero(t, because: ProtFSError(.network, "The server refused the byte range for '\(url)'."))
      return
    }
    if !(200..<300).contains(status) {
      let reason = Self.reasonPhrase(status)
      if status >= 500 || status == 408 || status == 429 {
        t.file.close()
        retry(
          t.task,
          because: ProtFSError(
            .network, "The server answered \(status) (\(reason)) for '\(url)'.", hint: "try again later"))
      } else {
        fail(
          t,
          ProtFSError(
            .network, "The server answered \(status) (\(reason)) for '\(url)'.",
            hint: status == 404 ? "check the URL" : "check the URL and the server's access rules"))
      }
      return
    }
    if result == CURLE_OK {
      core.finisher.post(.complete(t))
      return
    }
    if let error = Self.deterministicFailure(t, result: result) {
      fail(t, error)
      return
    }
    let error = ProtFSError(.network, "Cannot download '\(url)': \(detail).", hint: Self.hint(for: result))
    if Self.isRetryable(result) {
      t.file.close()
      retry(t.task, because: error)
    } else {
      fail(t, error)
    }
  }

  private static func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 400: return "Bad Request"
    case 401: return "Unauthorized"
    case 403: return "Forbidden"
    case 404: return "Not Found"
    case 408: return "Request Timeout"
    case 410: return "Gone"
    case 416: return "Range Not Satisfiable"
    case 429: return "Too Many Requests"
    case 500: return "Internal Server Error"
    case 502: return "Bad Gateway"
    case 503: return "Service Unavailable"
    case 504: return "Gateway Timeout"
    case 300..<400: return "Redirection"
    case 400..<500: return "Client Error"
    case 500..<600: return "Server Error"
    default: return "Unexpected Status"
    }
  }

  /// libcurl's failures that the same request would meet again, said in the user's terms: a
  /// redirect to a scheme protfs does not follow, a header larger than libcurl accepts. Never retried.
  private static func deterministicFailure(_ t: Transfer, result: CURLcode) -> ProtFSError? {
    let url = t.task.url.absoluteString
    if result == CURLE_UNSUPPORTED_PROTOCOL, let location = t.location,
      let scheme = URL(string: location)?.scheme?.lowercased(), scheme != "http" && scheme != "https"
    {
      return ProtFSError(
        .network,
        "The server redirected '\(url)' to a \(scheme): URL (\(location)), which protfs does not follow; it follows redirects to http and https only.",
        hint: "ask the server's owner for an http or https URL of the file")
    }
    // libcurl refuses a header line over 100 KiB with "Out of memory" (27) before 8.6, CURLE_TOO_LARGE (100) after.
    if !t.bodyStarted && (result == CURLE_OUT_OF_MEMORY || result.rawValue == 100) {
      return ProtFSError(
        .network,
        "The server sent an oversized header for '\(url)' (a header line over 100 KiB, more than protfs accepts).",
        hint: "the server is misconfigured or hostile; retrying would not help")
    }
    return nil
  }

  private static func isRetryable(_ code: CURLcode) -> Bool {
    switch code {
    case CURLE_COULDNT_CONNECT, CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING,
      CURLE_OPERATION_TIMEDOUT, CURLE_SSL_CONNECT_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM,
      CURLE_COULDNT_RESOLVE_HOST:
      return true
    default:
      return false
    }
  }

  private static func hint(for code: CURLcode) -> String? {
    switch code {
    case CURLE_URL_MALFORMAT: return "check the URL"
    case CURLE_UNSUPPORTED_PROTOCOL: return "protfs downloads http, https and file URLs"
    case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST: return "check that the server is up and reachable"
    case CURLE_FILE_COULDNT_READ_FILE: return "check that the file exists and is readable"
    case CURLE_TOO_MANY_REDIRECTS: return "the server redirects in a loop"
    case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE:
      return "the server's certificate is not trusted; trust its authority with a certificates file"
    default: return nil
    }
  }

  /// Schedules another attempt after the backoff delay, or fails the task when retries are used up.
  private func retry(_ task: DownloadTask, because error: ProtFSError) {
    let attempts = task.runtime.withLock { $0.attempts }
    guard attempts <= configuration.maximumRetries else {
      var final = error
      final.message = final.message.hasSuffix(".") ? String(final.message.dropLast()) : final.message
      final.message += " (gave up after \(attempts) attempts)."
      fail(task, final, deleting: TemporaryRemoval(task, in: configuration.fileSystem))
      return
    }
    let base = Monotonic.nanoseconds(configuration.retryBaseDelay)
    let cap = Monotonic.nanoseconds(configuration.retryMaximumDelay)
    let delay = min(cap, base << UInt64(min(attempts - 1, 30)))
    known.insert(task.id)
    retrying.append((Monotonic.now + delay, task))
  }

  private func fail(_ t: Transfer, _ error: ProtFSError) {
    t.file.close()
    fail(t.task, error, deleting: TemporaryRemoval(directory: t.directory, name: t.temporaryFileName))
  }

  private func fail(_ task: DownloadTask, _ error: ProtFSError, deleting removal: TemporaryRemoval?) {
    known.remove(task.id)
    core.finisher.post(.fail(task, error, deleting: removal))
  }

  // MARK: Stopping

  private func stopTransfer(of task: DownloadTask, _ reason: StopReason) {
    if let transfer = active[task.id] {
      detach(transfer)
      transfer.file.close()
    } else if known.contains(task.id) {
      retrying.removeAll { $0.task === task }
      paused.removeAll { $0.task === task }
      for key in queues.keys { queues[key]!.remove(task) }
    }
    known.remove(task.id)
    core.finisher.post(.stop(task, reason))
  }

  /// Session shutdown: every transfer stops where it is, still `running` in the store, so that the
  /// next session with this identifier picks it up.
  private func stopAll() {
    for transfer in Array(active.values) {
      detach(transfer)
      transfer.file.close()
    }
    retrying.removeAll()
    paused.removeAll()
    queues.removeAll()
    hostOrder.removeAll()
    known.removeAll()
  }

  // MARK: The device locking during a transfer

  /// The temp directory at `path`: the held one when it was opened or found at its path within
  /// the last access-check interval, else opened now, following no symlink.
  private func temporaryDirectory(_ path: String) throws(ProtFSError) -> DirectoryHandle {
    let now = Monotonic.now
    if let held = heldTemporaryDirectories[path],
      now - held.confirmed < Monotonic.nanoseconds(configuration.accessCheckInterval)
    {
      return held.handle
    }
    let opened = try configuration.fileSystem.openDirectory(path, creating: true)
    heldTemporaryDirectories[path] = (opened, now)
    return opened
  }

  /// Asks the access policy, per temp directory, whether running transfers may go on writing:
  /// denied ones stop and fail with resume data kept; waiting ones pause until allowed again.
  private func checkAccess(_ now: UInt64) {
    guard now - lastAccessCheck >= Monotonic.nanoseconds(configuration.accessCheckInterval) else { return }
    lastAccessCheck = now
    // Requests from other processes (`protfs tasks cancel ID`) arrive through the store.
    core.applyRequests()
    guard !active.isEmpty || !paused.isEmpty else { return }
    var answers: [String: DownloadAccessDecision] = [:]
    func answer(_ directory: String) -> DownloadAccessDecision {
      if let known = answers[directory] { return known }
      let decision = configuration.accessPolicy.canContinueWritingTemp(in: directory)
      answers[directory] = decision
      return decision
    }
    // A temp directory moved or swapped for a symlink mid-transfer stops its transfers now, not at
    // the end: the held directory may be outside the device by then.
    var current: [String: DirectoryHandle?] = [:]
    for transfer in Array(active.values) {
      let path = transfer.temporaryDirectory
      if current[path] == nil {
        current[path] = .some(try? configuration.fileSystem.openDirectory(path, creating: false))
      }
      var status = stat()
      let linkedElsewhere = fstat(transfer.file.rawValue, &status) == 0 && status.st_nlink != 1
      if let held = heldTemporaryDirectories[path], let found = current[path]!, held.handle.isSameDirectory(as: found) {
        heldTemporaryDirectories[path]!.confirmed = now
      }
      if !linkedElsewhere, let now = current[path]!, transfer.directory.isSameDirectory(as: now) { continue }
      detach(transfer)
      let url = transfer.task.url.absoluteString
      var error = DownloadFinisher.directoryChanged(path)
      error.message = "The download of '\(url)' stopped: " + error.message
      if linkedElsewhere {
        // Another name for the temp file could be outside the device: stop writing into it.
        error = ProtFSError(
          .invalidArgument,
          "The download of '\(url)' stopped: its temp file '\(transfer.temporaryPath)' was given another name (a hard link); protfs writes only to files nothing else names.",
          path: transfer.temporaryPath, hint: "remove the other link, then download it again")
      }
      fail(transfer, error)
    }
    for transfer in Array(active.values) {
      let decision = answer(transfer.temporaryDirectory)
      guard decision != .allow else { continue }
      detach(transfer)
      transfer.file.close()
      if case .deny(let code) = decision {
        let url = transfer.task.url.absoluteString
        // The bytes so far stay in the temp file, which the record keeps: the task can be resumed.
        core.finisher.post(
          .fail(
            transfer.task,
            ProtFSError(
              .protectedDataUnavailable,
              "Cannot go on writing the temp file of '\(url)' in '\(transfer.temporaryDirectory)': \(String(cString: strerror(code))).",
              path: transfer.temporaryDirectory, errno: code,
              hint: "the device locked during the download; unlock it and resume the task, or run `protfs init-cache`"
            ), deleting: nil))
      } else {
        known.insert(transfer.task.id)
        paused.append((transfer.temporaryDirectory, transfer.task))
        core.notify(.pausedForLock(taskID: transfer.task.id))
      }
    }
    guard !paused.isEmpty else { return }
    let ready = paused.filter { answer($0.directory) == .allow }
    guard !ready.isEmpty else { return }
    paused.removeAll { answer($0.directory) == .allow }
    for item in ready {
      known.remove(item.task.id)
      accept(item.task)
    }
  }

  // MARK: Timeouts and progress

  /// Ends attempts that received nothing, or less than the minimum speed, for their request
  /// timeout (retried), and tasks past their resource timeout (failed for good).
  private func checkTimeouts(_ now: UInt64) {
    guard !active.isEmpty else { return }
    let wallClock = Date().timeIntervalSince1970
    for transfer in Array(active.values) {
      let url = transfer.task.url.absoluteString
      let limit = transfer.requestLimit
      if wallClock > transfer.deadline {
        detach(transfer)
        fail(
          transfer,
          Self.resourceTimedOut(url, limit: transfer.deadline - transfer.task.runtime.withLock { $0.record.createdAt }))
        continue
      }
      if now > transfer.lastActivity && now - transfer.lastActivity > limit {
        detach(transfer)
        transfer.file.close()
        retry(
          transfer.task,
          because: ProtFSError(
            .network, "The server for '\(url)' sent nothing for \(Self.format(seconds: Double(limit) / 1e9)).",
            hint: "check the server, or allow a longer request timeout"))
        continue
      }
      guard now - transfer.speedWindowStart >= limit else { continue }
      // A trickle keeps `lastActivity` fresh; what it cannot do is move enough bytes in a window.
      let moved = transfer.position - transfer.speedWindowPosition
      let needed = Int64((Double(configuration.minimumSpeed) * Double(limit) / 1e9).rounded(.up))
      if moved < needed {
        detach(transfer)
        transfer.file.close()
        retry(
          transfer.task,
          because: ProtFSError(
            .network,
            "The server for '\(url)' sent \(moved) bytes in \(Self.format(seconds: Double(limit) / 1e9)), less than the minimum of \(configuration.minimumSpeed) bytes a second.",
            hint: "check the server, or allow a longer request timeout"))
        continue
      }
      transfer.speedWindowStart = now
      transfer.speedWindowPosition = transfer.position
    }
  }

  /// A timeout read back from the store, if it is a usable one; a damaged store's value gives way
  /// to the session's.
  private static func stored(_ seconds: Double?) -> Double? {
    guard let seconds, seconds.isFinite, seconds > 0 else { return nil }
    return seconds
  }

  private static func resourceTimedOut(_ url: String, limit: Double) -> ProtFSError {
    ProtFSError(
      .network, "The download of '\(url)' did not finish within its resource timeout of \(format(seconds: limit)).",
      errno: ETIMEDOUT, hint: "allow a longer resource timeout, or download it again")
  }

  /// `seconds` in the largest whole unit that fits (`7 d`, `2 h`, `90 s`), or in seconds.
  static func format(seconds: Double) -> String {
    for (unit, size) in [("d", 86400.0), ("h", 3600.0), ("min", 60.0)] where seconds >= size {
      if (seconds / size).rounded() == seconds / size { return "\(Int(seconds / size)) \(unit)" }
    }
    return String(format: "%g s", seconds)
  }

  private func reportProgress(_ now: UInt64) {
    let interval = Monotonic.nanoseconds(configuration.progressEventInterval)
    for transfer in active.values where transfer.position != transfer.reportedPosition {
      guard now - transfer.lastProgressEvent >= interval else { continue }
      transfer.lastProgressEvent = now
      let position = transfer.position
      let previous = transfer.reportedPosition
      transfer.reportedPosition = position
      // The count first, then the event: a reader who subscribes late and then reads the count
      // misses nothing (`DownloadSession.events`).
      let expected = transfer.task.runtime.withLock { r in
        r.record.bytesReceived = position
        return r.record.bytesExpected
      }
      core.notifyProgress(transfer.task, bytesWritten: position - previous, total: position, expected: expected)
    }
    if now - lastPersist >= Monotonic.nanoseconds(configuration.progressPersistInterval) {
      lastPersist = now
      // Staged bytes go to the file first, so a process killed after this snapshot finds at least
      // the bytes it records.
      var records: [DownloadTaskRecord] = []
      for transfer in active.values {
        transfer.flush()
        let position = transfer.position
        records.append(
          transfer.task.runtime.withLock { r in
            r.record.bytesReceived = position
            return r.record
          })
      }
      core.persist(records)
    }
  }
}

/// A FIFO of tasks that pops from the front without shifting the array each time.
private struct HostQueue {
  private var tasks: [DownloadTask] = []
  private var head = 0

  var isEmpty: Bool { head == tasks.count }

  mutating func append(_ task: DownloadTask) { tasks.append(task) }

  mutating func popFirst() -> DownloadTask? {
    guard head < tasks.count else { return nil }
    let task = tasks[head]
    head += 1
    if head == tasks.count {
      tasks.removeAll(keepingCapacity: true)
      head = 0
    }
    return task
  }

  mutating func remove(_ task: DownloadTask) {
    if let index = tasks[head...].firstIndex(where: { $0 === task }) { tasks.remove(at: index) }
  }
}

private let writeCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
  return transfer.receive(UnsafeRawPointer(data), count: size * count)
}

private let headerCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
  transfer.header(UnsafeRawBufferPointer(start: data, count: size * count))
  return size * count
}
