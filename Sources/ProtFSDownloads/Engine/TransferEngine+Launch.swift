import CCurl
import Foundation
import ProtFSSeal
import ProtFSSystem

/// Launching an attempt: the temp file opened (or continued) in its held directory, a libcurl
/// easy handle configured to write into it, and the transfer added to the multi handle.
extension TransferEngine {
  /// The access policy's answer for a new temp file in `directory`, asked once per pass of
  /// `startReady()` (each time outside one).
  private func canWriteTemp(in directory: String) -> DownloadAccessDecision {
    if let known = passDecisions?[directory] { return known }
    let decision = configuration.accessPolicy.canWriteTemp(in: directory)
    passDecisions?[directory] = decision
    return decision
  }

  /// The labelling of new files in `directory`, read once per pass of `startReady()` (each time
  /// outside one).
  private func labels(for directory: DirectoryHandle) throws(ProtFSError) -> FileLabels {
    guard passLabels != nil else { return try configuration.fileSystem.labels(for: directory) }
    return try passLabels!.labels(for: directory, in: configuration.fileSystem)
  }

  /// Starts an attempt at `task` on a connection to `hostKey`, or fails the task when it cannot
  /// start (past its resource timeout, an unsupported scheme, a temp file that cannot be written).
  package func launch(_ task: DownloadTask, hostKey: String) {
    let record = task.runtime.withLock { r in
      r.attempts += 1
      return r.record
    }
    guard record.state == .running else {
      hosts.forget(task.id)
      return
    }
    guard let deadline = resourceDeadline(of: task, record) else { return }
    if record.upload != nil {
      launchUpload(task, record: record, hostKey: hostKey, deadline: deadline)
      return
    }
    let directory = record.temporaryDirectory
    let held: DirectoryHandle
    let opened: TemporaryFile.Opened
    do {
      try checkCanDownload(task, record)
      // The directory is opened once, following no symlink, and held: the temp file is created,
      // written and later placed relative to it.
      held = try temporaryDirectory(directory)
      opened = try openTemporaryFile(for: record, in: held)
    } catch {
      fail(task, error, deleting: nil)
      return
    }
    task.runtime.withLock { r in
      r.record.temporaryFileName = opened.name
      r.record.bytesReceived = opened.size
    }
    let digest: SHA256Digest?
    do {
      digest = try continuedDigest(of: opened, in: held, for: record)
    } catch {
      opened.file.close()
      fail(task, error, deleting: TemporaryRemoval(directory: held, name: opened.name))
      return
    }
    let easy = idleHandles.popLast() ?? protfs_curl_easy_init()!
    let transfer = Transfer(
      task: task, easy: easy, file: opened.file, temporaryDirectory: directory, directory: held,
      temporaryFileName: opened.name, isNamed: opened.isNamed,
      offset: opened.size, isHTTP: task.url.scheme?.lowercased() != "file", hostKey: hostKey, digest: digest,
      staging: stagingBuffers, writesBehind: configuration.synchronizesFiles)
    transfer.cipher = opened.cipher
    start(transfer, record: record, deadline: deadline) { configure(transfer, url: task.url, record: record) }
  }

  /// When `task`'s resource timeout ends (seconds since 1970), or nil when it has ended: the task
  /// is failed then. The timeout runs from the task's creation, whichever process resumes it.
  func resourceDeadline(of task: DownloadTask, _ record: DownloadTaskRecord) -> Double? {
    let resourceLimit =
      TransferClassification.stored(record.resourceTimeout) ?? Monotonic.seconds(configuration.resourceTimeout)
    let deadline = record.createdAt + resourceLimit
    guard Date().timeIntervalSince1970 > deadline else { return deadline }
    fail(
      task, TransferClassification.resourceTimedOut(task.url.absoluteString, limit: resourceLimit),
      deleting: TemporaryRemoval(task, in: configuration.fileSystem))
    return nil
  }

  /// Throws why the download `task` cannot start before anything is written: an unsupported
  /// scheme, a URL without a file name, a checksum without libcrypto, or a temp directory the
  /// lock keeps closed. Names the file after its URL when the app did not.
  private func checkCanDownload(_ task: DownloadTask, _ record: DownloadTaskRecord) throws(ProtFSError) {
    let url = task.url
    let scheme = url.scheme?.lowercased() ?? ""
    guard scheme == "http" || scheme == "https" || scheme == "file" else {
      let shown = url.scheme ?? ""
      throw ProtFSError(
        .invalidArgument, "The URL '\(url.absoluteString)' uses the unsupported scheme '\(shown)'.",
        remedy: .advice("only http, https and file URLs can be downloaded"))
    }
    if record.fileName == nil {
      let name = try DownloadFileName.fromURL(url)
      task.runtime.withLock { $0.record.fileName = name }
    }
    // The checksum needs libcrypto: checked before anything is written.
    if record.expectedSHA256 != nil { try ProtFSError.requireLibcrypto() }
    let directory = record.temporaryDirectory
    guard canWriteTemp(in: directory) == .allow else {
      throw Self.temporaryFileUnavailable(url.absoluteString, in: directory)
    }
  }

  /// The error of a temp file that cannot be made now in `directory` because of the lock: its class
  /// is unavailable (on a sealed device: its key is evicted), as nsurlsessiond's EPERM on a locked
  /// phone.
  private static func temporaryFileUnavailable(_ url: String, in directory: String) -> ProtFSError {
    ProtFSError(
      .protectedDataUnavailable,
      "Cannot write the temp file of '\(url)' in '\(directory)': Operation not permitted (the Downloads directory's protection class is not available while the device is locked).",
      path: directory, errno: EPERM, remedy: .initializeDownloadsDirectory)
  }

  /// The temp file of `record` in `held`: one the finisher made ahead, or the kept one continued,
  /// or a new one.
  private func openTemporaryFile(for record: DownloadTaskRecord, in held: DirectoryHandle) throws(ProtFSError)
    -> TemporaryFile.Opened
  {
    if configuration.usesUnnamedTemporaryFiles, record.temporaryFileName == nil,
      let file = temporaryFiles.take(in: held, path: record.temporaryDirectory)
    {
      // Made ahead by the finisher, unnamed and labelled (`TemporaryFileReserve`).
      return .unnamed(file)
    }
    let fileSystem = configuration.fileSystem
    // On a sealed device a new file gets its key as it is labelled; a continued one has its own.
    var made = false
    var cipher: FileCipher?
    var opened: TemporaryFile.Opened
    do {
      opened = try TemporaryFile.open(
        in: held, existingName: record.temporaryFileName,
        canContinue: record.isResumable && (record.entityTag != nil || record.lastModified != nil),
        unnamed: configuration.usesUnnamedTemporaryFiles,
        accepts: { fd, status in fileSystem.isLabelledAsNew(file: fd, status: status, in: held) },
        label: { fd throws(ProtFSError) in
          made = true
          try labels(for: held).labelNew(fd)
          cipher = try fileSystem.sealNew(fd, in: held)
        })
    } catch  where error.code == .protectedDataUnavailable {
      throw Self.temporaryFileUnavailable(record.url, in: record.temporaryDirectory)
    }
    do {
      opened.cipher = made ? cipher : try fileSystem.cipher(of: opened.file.rawValue, path: held.pathOf(opened.name))
    } catch {
      opened.file.close()
      throw error
    }
    return opened
  }

  /// The digest the task's checksum is computed in, holding the bytes the temp file has already;
  /// nil when the task has no checksum.
  private func continuedDigest(
    of opened: TemporaryFile.Opened, in held: DirectoryHandle, for record: DownloadTaskRecord
  ) throws(ProtFSError) -> SHA256Digest? {
    guard record.expectedSHA256 != nil else { return nil }
    let hasher = SHA256Digest()
    if opened.size > 0,
      let error = TemporaryFile.hashPrefix(
        fd: opened.file.rawValue, count: opened.size, into: hasher, path: held.pathOf(opened.name),
        cipher: opened.cipher)
    {
      throw error
    }
    return hasher
  }

  /// Gives `transfer` the task's request timeout and `deadline`, sets its handle up with
  /// `setUp`, and adds it to the multi handle: the attempt runs.
  func start(
    _ transfer: Transfer, record: DownloadTaskRecord, deadline: Double, setUp: () -> Void
  ) {
    transfer.requestLimit =
      TransferClassification.stored(record.requestTimeout).map { Monotonic.nanoseconds(seconds: $0) }
      ?? Monotonic.nanoseconds(configuration.requestTimeout)
    transfer.deadline = deadline
    setUp()
    active[transfer.task.id] = transfer
    hosts.opened(transfer.hostKey)
    protfs_curl_multi_add_handle(multi, transfer.easy)
  }

  /// The most redirects one attempt follows, a download's or an upload's.
  package static let maximumRedirects = 20

  /// Sets the easy handle of `transfer` up: callbacks, limits, protocols, the task's request
  /// headers and, for a resumed file, the range and its validator.
  private func configure(_ transfer: Transfer, url: URL, record: DownloadTaskRecord) {
    let easy = transfer.easy
    configureConnection(transfer, url: url, write: writeCallback, header: headerCallback)
    // The large receive buffer is what lets one write(2) carry up to a MiB (measured: 512 KiB to 10 MiB buffers halve a 1 GiB download's time).
    protfs_curl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, receiveBufferSize)
    protfs_curl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
    protfs_curl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, Self.maximumRedirects)
    protfs_curl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https,file")
    // A server must not redirect a download to a local file.
    protfs_curl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    var list: UnsafeMutablePointer<curl_slist>?
    if transfer.isHTTP {
      for header in record.requestHeaders { list = protfs_curl_slist_append(list, "\(header.name): \(header.value)") }
      if let method = record.requestMethod { Self.configureMethod(easy, method: method, body: record.requestBody) }
    }
    if transfer.offset > 0 {
      protfs_curl_easy_setopt_string(easy, CURLOPT_RANGE, "\(transfer.offset)-")
      // If-Range needs a strong validator; a weak ETag falls back to Last-Modified.
      let validator = record.entityTag.flatMap { $0.hasPrefix("W/") ? nil : $0 } ?? record.lastModified
      if let validator, transfer.isHTTP { list = protfs_curl_slist_append(list, "If-Range: \(validator)") }
    }
    if let list {
      transfer.headerList = list
      protfs_curl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
    }
  }

  /// A request's method and body (a download's, a data task's): a POST as libcurl's own (so a 301,
  /// 302 or 303 redirect turns it into a GET, as Foundation does), HEAD without a body, any other
  /// method by name. The body is copied into the handle.
  package static func configureMethod(_ easy: UnsafeMutableRawPointer, method: String, body: Data?) {
    switch method {
    case "HEAD": protfs_curl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
    case "POST": protfs_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
    default: protfs_curl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method)
    }
    guard DownloadRequest.sendsBody(method) else { return }
    let body = body ?? Data()
    protfs_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
    guard !body.isEmpty else {
      // An empty body still needs a pointer, or libcurl would read one from a callback.
      protfs_curl_easy_setopt_string(easy, CURLOPT_COPYPOSTFIELDS, "")
      return
    }
    _ = body.withUnsafeBytes { raw in
      protfs_curl_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress!))
    }
  }

  /// What every attempt's easy handle gets, download or upload: the URL, `transfer` as the context
  /// of its callbacks (`write` for the body, `header` for header lines), the error buffer, the
  /// connect timeout, no signals, the user agent and the trusted certificates.
  package func configureConnection(
    _ transfer: Transfer, url: URL, write: curl_write_callback, header: curl_write_callback
  ) {
    let easy = transfer.easy
    Self.configureRequest(
      easy, url: url, userAgent: configuration.userAgent, certificates: configuration.trustedCertificatesPath,
      connectTimeout: configuration.connectTimeout)
    let context = Unmanaged.passUnretained(transfer).toOpaque()
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, context)
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_WRITEFUNCTION, write)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_HEADERFUNCTION, header)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
  }

  /// What every request's easy handle gets (a download's, an upload's, a data task's): the URL,
  /// the connect timeout, no signals, the user agent and the trusted certificates.
  package static func configureRequest(
    _ easy: UnsafeMutableRawPointer, url: URL, userAgent: String, certificates: String?, connectTimeout: Duration
  ) {
    protfs_curl_easy_setopt_string(easy, CURLOPT_URL, url.absoluteString)
    protfs_curl_easy_setopt_long(
      easy, CURLOPT_CONNECTTIMEOUT_MS, Int(Monotonic.nanoseconds(connectTimeout) / 1_000_000))
    protfs_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
    protfs_curl_easy_setopt_string(easy, CURLOPT_USERAGENT, userAgent)
    if let certificates { protfs_curl_easy_setopt_string(easy, CURLOPT_CAINFO, certificates) }
  }

  /// libcurl accepts 1 KiB to 10 MiB.
  package var receiveBufferSize: Int { stagingBuffers.size }
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
