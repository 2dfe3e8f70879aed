import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The service's answers to its requests.
extension SessionService {
  /// Answers `connection`'s requests until it closes; a `subscribe` turns it into an event stream
  /// on which later lines are acknowledgements (answered by nothing).
  func serve(_ connection: FileDescriptor, peer: Peer) {
    var subscribed: String?
    var subscriber: SessionSubscriber?
    reading: while true {
      let line: String
      switch ControlSocket.nextLine(connection, limit: SessionWire.maximumRequestLine, within: lineTimeout) {
      case .line(let read): line = read
      case .ended: break reading
      case .tooLong:
        // Told once, before the connection ends (the rest of the line is never read).
        let reply = SessionServiceReply(
          error: ProtFSError(
            .invalidArgument,
            "The session service takes request lines of at most \(SessionWire.maximumRequestLine) bytes; this one is longer."
          ))
        if subscribed == nil { SessionWire.send(reply, on: connection) }
        break reading
      }
      // A line that is no request gets one answer saying so, and the connection ends: a client
      // that sends garbage is not one to go on reading.
      let request: SessionServiceRequest
      do {
        request = try JSONDecoder().decode(SessionServiceRequest.self, from: Data(line.utf8))
      } catch {
        let reply = SessionServiceReply(
          error: ProtFSError(
            .invalidArgument,
            "The session service cannot read the request: \(SessionWire.problem(error)); it takes one JSON object a line."
          ))
        if subscribed == nil { SessionWire.send(reply, on: connection) }
        break
      }
      if let session = subscribed {
        if request.kind == .acknowledge, let id = request.task {
          // A subscription gets no replies: a refused acknowledgement changes nothing, and one the
          // store could not take waits in `lateAcknowledgements`.
          try? acknowledge(id, fileOnly: request.fileOnly == true, session: session, peer: peer)
        }
        continue
      }
      var reply = SessionServiceReply()
      do throws(ProtFSError) {
        reply = try answer(request, peer: peer) { ControlSocket.hasHungUp(connection) }
      } catch {
        reply.error = error
      }
      if request.kind == .subscribe, reply.error == nil, let session = request.session {
        // A subscription speaks only to acknowledge: its reads wait as long as it lasts.
        ControlSocket.limitWaits(connection, reads: false)
        SessionWire.send(reply, on: connection)
        subscribed = session
        subscriber = subscribe(session, connection: connection)
        continue
      }
      SessionWire.send(reply, on: connection)
      if request.kind == .stop, reply.error == nil { stop() }
    }
    if let session = subscribed {
      state.withLock { state in
        if state.subscribers[session]?.connection === connection { state.subscribers[session] = nil }
      }
    }
    // Its writer lets go of the connection before the caller closes it.
    subscriber?.finish()
  }

  /// Throws unless the service may fetch `url` for `peer`. The service runs as root, and libcurl
  /// reads a `file:` URL with the service's rights: fetched for an app, it would copy whatever root
  /// can read into the app's container. An app's session takes http and https only, as an iOS
  /// background session does; root (`download --detach`) may name a file.
  static func checkFetchable(_ url: URL, for peer: Peer) throws(ProtFSError) {
    let scheme = url.scheme?.lowercased() ?? ""
    if scheme == "http" || scheme == "https" {
      guard let host = url.host, !host.isEmpty else {
        throw ProtFSError(
          .invalidArgument, "The URL '\(url.absoluteString)' names no host.",
          remedy: .advice("give an http or https URL with a host"))
      }
      return
    }
    if scheme == "file" && peer.isTrustedUser { return }
    throw ProtFSError(
      .permissionDenied,
      "A background session downloads only http and https URLs, not '\(url.absoluteString)'.", errno: EPERM,
      remedy: .advice("give an http or https URL"))
  }

  /// The reply to `request` from `peer`, or the error it gets: every check of who may ask what is
  /// here, before anything is opened or changed (the unit tests call it without a socket). A
  /// request that waits stops waiting once `hungUp` says the peer closed its connection.
  func answer(_ request: SessionServiceRequest, peer: Peer, hungUp: () -> Bool = { false }) throws(ProtFSError)
    -> SessionServiceReply
  {
    var reply = SessionServiceReply()
    switch request.kind {
    case .ping:
      reply.pid = getpid()
    case .openSession, .adopt:
      guard var configuration = request.configuration else { throw Self.missing("configuration") }
      try configuration.validate()
      // The app the store has the session under, if any: what the app says is checked against it.
      let known = try store.sessions()
      let owner = known.first { $0.identifier == configuration.identifier }?.bundleID
      if configuration.bundleID == nil { configuration.bundleID = try appOf(peer)?.bundleID ?? owner }
      guard let bundle = configuration.bundleID else {
        try authorize(peer, bundleID: "(none)")
        throw ProtFSError(.invalidArgument, "The session '\(configuration.identifier)' names no app.")
      }
      try authorize(peer, bundleID: bundle)
      // An app that names its own bundle and another app's session identifier reaches nothing of
      // that session: it is told the identifier is taken, without whose it is.
      if let owner, owner != bundle {
        throw Self.takenIdentifier(configuration.identifier, owner: peer.isTrustedUser ? owner : nil)
      }
      // Each session the service hosts holds a thread and descriptors, and the store reopens it at
      // every start: an app opens a bounded number (reopening one of its own is always allowed).
      // At the limit, the app's sessions that hold nothing any more make room.
      if owner == nil, !peer.isTrustedUser,
        known.count(where: { $0.bundleID == bundle }) >= Self.maximumSessionsPerApp,
        !forgetIdleSession(of: bundle)
      {
        throw ProtFSError(
          .permissionDenied,
          "The app \(bundle) has \(Self.maximumSessionsPerApp) background sessions with unfinished tasks on this device already; reuse one of their identifiers, or invalidate one (invalidateAndCancel).",
          errno: EPERM)
      }
      // An app's session hands its files over in its Downloads directory: it names no directory
      // for the service to write in (`download --detach`, run by root, does).
      if request.destinationDirectory != nil, !peer.isTrustedUser {
        throw ProtFSError(
          .permissionDenied, "An app's session cannot name a destination directory; its files are handed over.",
          errno: EPERM)
      }
      let settings = HostedSessionSettings(
        configuration: configuration, destinationDirectory: request.destinationDirectory)
      let hosted = try host(settings)
      state.withLock { state in
        _ = state.forceQuit.remove(bundle)
        _ = state.launchNotified.remove(configuration.identifier)
      }
      if request.kind == .adopt {
        _ = try hosted.session.adoptUnfinished()
        // The resume requests `download --detach` recorded with its tasks: these, and those of a
        // detach killed before it handed its tasks over, which this adoption claimed too.
        hosted.session.applyPendingRequests()
        for id in request.tasks ?? [] { hosted.session.task(id: id)?.resume() }
      }
    case .createDownloadTask:
      let hosted = try session(request, peer: peer)
      guard let wanted = request.request else { throw Self.missing("request") }
      try checkNewTask(wanted, in: hosted, peer: peer)
      let task: DownloadTask
      if let data = request.resumeData {
        // Apple's resume data, which the app may have rewritten: believed only where it names a
        // download this session keeps, with that URL and that many bytes (`resumable`).
        let (resume, source) = try resumable(data, in: hosted)
        task = try hosted.session.downloadTask(resuming: resume, from: source, handsOver: true)
        if let text = wanted.taskDescription { task.taskDescription = text }
      } else {
        try Self.checkFetchable(wanted.url, for: peer)
        var download = DownloadRequest(
          url: wanted.url, taskDescription: wanted.taskDescription, headers: wanted.headers, method: wanted.method,
          body: wanted.body)
        download.handsOver = true
        task = try hosted.session.downloadTasks(with: [download])[0]
      }
      _ = state.withLock { $0.launchNotified.remove(hosted.session.identifier) }
      reply.snapshot = snapshot(task.record)
    case .createUploadTask:
      let hosted = try session(request, peer: peer)
      guard let wanted = request.request else { throw Self.missing("request") }
      try checkNewTask(wanted, in: hosted, peer: peer)
      guard let path = request.path else { throw Self.missing("path") }
      let upload = UploadRequest(
        url: wanted.url, method: try UploadMethod.parse(wanted.method),
        headers: wanted.headers,
        taskDescription: wanted.taskDescription)
      let task = try hosted.session.uploadTask(with: upload, fromFile: path, handsOver: true)
      _ = state.withLock { $0.launchNotified.remove(hosted.session.identifier) }
      reply.snapshot = snapshot(task.record)
    case .resume, .suspend, .cancel, .setDescription:
      let hosted = try session(request, peer: peer)
      guard let id = request.task, let task = hosted.session.task(id: id) else {
        throw ProtFSError(
          .notFound, "The session '\(hosted.session.identifier)' has no task \(request.task ?? 0).",
          remedy: .listTasks)
      }
      switch request.kind {
      case .resume:
        // A date the app gave (`earliestBeginDate`) counts for a task that has not begun yet; one
        // that ran already is resumed as it is.
        if let beginsAt = request.beginsAt, task.record.state == .suspended, task.record.bytesReceived == 0 {
          try task.setEarliestBeginDate(Date(timeIntervalSince1970: beginsAt))
        }
        // Running again, it is no longer one the system cancelled.
        try store.setCancelledReason(nil, tasks: [id])
        task.resume()
      case .suspend: task.suspend()
      case .setDescription:
        try Self.checkDescription(request.text)
        task.taskDescription = request.text
      default:
        if request.producingResumeData == true {
          reply.resumeData = cancelKeepingPartialFile(task, bundleID: hosted.bundleID).flatMap(Self.appleResumeData)
        } else {
          task.cancel()
        }
      }
    case .invalidate:
      let hosted = try session(request, peer: peer)
      invalidate(hosted, cancelling: request.cancelling == true, unless: hungUp)
    case .tasks:
      let hosted = try session(request, peer: peer)
      let reasons = (try? store.cancelledReasons(session: hosted.session.identifier)) ?? [:]
      reply.snapshots = try store.tasks(session: hosted.session.identifier)
        .filter { $0.state.isUnfinished || $0.awaitsDelivery }
        .map { record in
          var listed = snapshot(record, cancelledReason: reasons[record.id])
          // A task whose completion the app has not been given is still running to it: Apple's
          // `.completed` says the delegate gets no more calls, and this one's are still to come.
          // (MZDownloadManager, relaunched, keeps the running and suspended tasks it is listed.)
          if !record.state.isUnfinished {
            listed.state = "running"
            listed.error = nil
            listed.cancelledReason = nil
            listed.resumeData = nil
          }
          return listed
        }
    case .appTasks:
      // Session by session: another app's records (request bodies included) are never read.
      var records: [DownloadTaskRecord] = []
      for session in try sessions(request, peer: peer) { records += try store.tasks(session: session) }
      reply.records = records.sorted { $0.id < $1.id }
    case .prune:
      let cutoff = try request.olderThan.map { seconds throws(ProtFSError) in
        guard seconds.isFinite, seconds >= 0 else {
          throw ProtFSError(.invalidArgument, "The request to the session service has an age (olderThan) below zero.")
        }
        return Date().addingTimeInterval(-seconds)
      }
      reply.pruned = try store.prune(finishedBefore: cutoff, sessions: try sessions(request, peer: peer))
    case .subscribe:
      _ = try session(request, peer: peer)
    case .acknowledge:
      guard let session = request.session, let id = request.task else { throw Self.missing("session and task") }
      try acknowledge(id, fileOnly: request.fileOnly == true, session: session, peer: peer)
    case .eventsHandled:
      guard let session = request.session else { throw Self.missing("session") }
      // A session the store does not know has nothing queued: the answer needs nothing more.
      guard let bundle = try? bundleOf(session) else { return reply }
      try authorize(peer, bundleID: bundle, session: session)
      for record in try store.pendingDeliveries(session: session) {
        try store.acknowledge(task: record.id, fileSystem: fileSystem)
      }
      try store.setRelaunchError(nil, session: session)
      // Answered: the next batch of the session may wake or launch the app again.
      _ = state.withLock { $0.launchNotified.remove(session) }
    case .markDelivered:
      let hosted = try self.session(request, peer: peer)
      flushDeliveries(hosted.session.identifier)
      state.withLock { $0.subscribers[hosted.session.identifier] }?.send(.queuedEventsDelivered)
    case .forceQuit:
      guard let bundle = request.bundleID else { throw Self.missing("bundleID") }
      try authorize(peer, bundleID: bundle)
      forceQuitApp(bundle)
    case .wake:
      completeWaitingTasks()
    case .wait:
      reply.notCompleted = try waitUntilSettled(request.tasks ?? [], peer: peer, unless: hungUp)
    case .stop:
      guard peer.uid == 0 else {
        throw ProtFSError(.permissionDenied, "Only root stops the session service.", errno: EPERM)
      }
    }
    return reply
  }

  /// The most sessions one app may have on the device.
  package static let maximumSessionsPerApp = 32

  /// The most unfinished tasks one app may have in all its sessions: each is kept in the store
  /// (root's, shared by every app) and listed whole by `tasks`.
  package static let maximumUnfinishedTasksPerApp = 10_000
  /// The longest task description kept, in bytes.
  package static let maximumDescriptionLength = 4096
  /// The longest URL a task may have, in bytes.
  package static let maximumURLLength = 16 << 10
  /// The most bytes a task's header names and values may have together.
  package static let maximumHeaderBytes = 64 << 10

  /// Throws unless `request` may become a new task of `hosted` for `peer`: its description,
  /// URL and headers within their limits, and (for an app) its app below its task limit.
  private func checkNewTask(_ request: SessionRequest, in hosted: HostedSession, peer: Peer) throws(ProtFSError) {
    try Self.checkDescription(request.taskDescription)
    let url = request.url.absoluteString
    guard url.utf8.count <= Self.maximumURLLength else {
      throw ProtFSError(
        .invalidArgument, "The URL '\(url.prefix(80))…' is longer than \(Self.maximumURLLength) bytes.")
    }
    guard request.headers.reduce(0, { $0 + $1.name.utf8.count + $1.value.utf8.count }) <= Self.maximumHeaderBytes
    else {
      throw ProtFSError(.invalidArgument, "The request's headers are longer than \(Self.maximumHeaderBytes) bytes.")
    }
    guard !peer.isTrustedUser else { return }
    let sessions = try store.sessions().filter { $0.bundleID == hosted.bundleID }.map(\.identifier)
    guard try store.unfinishedTaskCount(sessions: sessions) < Self.maximumUnfinishedTasksPerApp else {
      throw ProtFSError(
        .permissionDenied,
        "The app \(hosted.bundleID) has \(Self.maximumUnfinishedTasksPerApp) unfinished background tasks already; cancel some or wait for them.",
        errno: EPERM)
    }
  }

  /// Throws for a task description longer than `maximumDescriptionLength` bytes.
  private static func checkDescription(_ text: String?) throws(ProtFSError) {
    guard let text, text.utf8.count > maximumDescriptionLength else { return }
    throw ProtFSError(
      .invalidArgument,
      "The task description is \(text.utf8.count) bytes long; the session service keeps at most \(maximumDescriptionLength)."
    )
  }

  /// Ends `hosted` for its app, which invalidated it: with `cancelling`, its unfinished tasks are
  /// cancelled and waited for (until `giveUp`); once none is unfinished, the session is forgotten.
  /// One with tasks still running (another process of the app gave it more) stays until its app
  /// invalidates it again, or it holds nothing and makes room for another.
  func invalidate(_ hosted: HostedSession, cancelling: Bool, unless giveUp: () -> Bool) {
    var unfinished = hosted.session.allTasks.filter { $0.state.isUnfinished }
    if cancelling, !unfinished.isEmpty {
      for task in unfinished { task.cancel() }
      guard DownloadTask.waitUntilAllSettled(unfinished, unless: giveUp) != nil else { return }
      unfinished = unfinished.filter { $0.state.isUnfinished }
    }
    if unfinished.isEmpty { forget(hosted.session.identifier) }
  }

  /// Forgets the oldest session of `bundleID` that holds nothing (no unfinished task, no
  /// completion owed to the app) and that no app follows now; false when there is none.
  func forgetIdleSession(of bundleID: String) -> Bool {
    let followed = state.withLock { Set($0.subscribers.keys) }
    guard let idle = (try? store.idleSessions(of: bundleID))?.first(where: { !followed.contains($0) }) else {
      return false
    }
    forget(idle)
    return true
  }

  /// Stops running session `identifier` and removes it from the store: its subscriber is let go,
  /// its transfers end, and its records go (`DownloadStore.forgetSession`).
  func forget(_ identifier: String) {
    let (hosted, subscriber) = state.withLock { state in
      _ = state.launchNotified.remove(identifier)
      return (state.hosted.removeValue(forKey: identifier), state.subscribers.removeValue(forKey: identifier))
    }
    // Its connection's own thread then ends the subscription, as after a force-quit.
    if let subscriber { ControlSocket.shutDown(subscriber.connection) }
    hosted?.session.invalidate()
    do {
      try store.forgetSession(identifier)
    } catch {
      report("cannot forget '\(identifier)': \(error.message)")
    }
  }

  /// The hosted session the request names, opened from the store when it is a service session
  /// not open yet, after the peer check.
  private func session(_ request: SessionServiceRequest, peer: Peer) throws(ProtFSError) -> HostedSession {
    guard let identifier = request.session else { throw Self.missing("session") }
    let bundle = try bundleOf(identifier)
    try authorize(peer, bundleID: bundle, session: identifier)
    if let existing = state.withLock({ $0.hosted[identifier] }) { return existing }
    let json = try store.serviceSessions().first { $0.identifier == identifier }?.configuration
    guard let json else { throw Self.unknownSession(identifier) }
    return try host(HostedSessionSettings.decode(json, session: identifier).get())
  }

  /// The sessions whose tasks `peer` may list and prune: its app's, or `request.session` alone
  /// when it is one of them; root names the app with `request.bundleID`, or has every app's. A
  /// process that is no app and not root has none: it is refused.
  private func sessions(_ request: SessionServiceRequest, peer: Peer) throws(ProtFSError) -> [String] {
    let bundle: String?
    if peer.isTrustedUser {
      bundle = request.bundleID
    } else {
      guard let app = try appOf(peer), peer.isStillConnectedProcess else {
        throw ProtFSError(
          .permissionDenied,
          "Process \(peer.pid) (uid \(peer.uid)) is not running as an app; only root or an app may list or prune tasks here.",
          errno: EPERM, remedy: .useSessionFromItsApp)
      }
      bundle = app.bundleID
    }
    let sessions = try store.sessions().filter { bundle == nil || $0.bundleID == bundle }.map(\.identifier)
    if let wanted = request.session {
      // Another app's session is as unknown as one that does not exist.
      guard sessions.contains(wanted) else { throw Self.unknownSession(wanted) }
      return [wanted]
    }
    return sessions
  }

  /// The app of session `identifier`, throwing when the store has no such session.
  func bundleOf(_ identifier: String) throws(ProtFSError) -> String {
    guard let bundle = try store.sessions().first(where: { $0.identifier == identifier })?.bundleID else {
      throw Self.unknownSession(identifier)
    }
    return bundle
  }

  /// The error for a session nobody opened.
  package static func unknownSession(_ identifier: String) -> ProtFSError {
    ProtFSError(
      .notFound, "There is no background session '\(identifier)' on this device.",
      remedy: .listSessions)
  }

  /// The error for an identifier another app's session has, naming that app when `owner` is
  /// given (to root alone).
  static func takenIdentifier(_ identifier: String, owner: String?) -> ProtFSError {
    let whose = owner.map { "the app '\($0)'" } ?? "another app"
    return ProtFSError(
      .alreadyExists, "The session identifier '\(identifier)' belongs to \(whose) on this device.",
      remedy: .advice("give the session an identifier of its own, such as one starting with the app's bundle id"))
  }

  private static func missing(_ what: String) -> ProtFSError {
    ProtFSError(.invalidArgument, "The request to the session service has no \(what).")
  }

  /// Opens (or returns) the hosted session of `settings`, registering it as a service session.
  @discardableResult
  func host(_ settings: HostedSessionSettings) throws(ProtFSError) -> HostedSession {
    let configuration = settings.configuration
    guard let bundleText = configuration.bundleID else { throw Self.missing("bundle id") }
    if let existing = state.withLock({ $0.hosted[configuration.identifier] }) {
      // A hosted session is returned only for its own app, whoever asks.
      guard existing.bundleID == bundleText else {
        throw Self.takenIdentifier(configuration.identifier, owner: nil)
      }
      return existing
    }
    try configuration.validate()
    let bundle = try BundleID(bundleText)
    let destination =
      try settings.destinationDirectory.map { path throws(ProtFSError) in try device.resolve(path) }
      ?? device.container(bundle).downloadsPath
    var download = try device.downloadConfiguration(
      bundleID: bundle, identifier: configuration.identifier, destination: destination)
    download.maximumConnectionsPerHost = max(1, configuration.connectionsPerHost)
    download.requestTimeout = .milliseconds(Int64((configuration.requestTimeout * 1000).rounded()))
    download.resourceTimeout = .milliseconds(Int64((configuration.resourceTimeout * 1000).rounded()))
    download.resumesReattachedTasks = true
    if settings.destinationDirectory == nil { try giveDownloadsToTheApp(bundle) }
    do {
      try settings.register(in: store)
    } catch  where error.code == .alreadyExists {
      // Another app registered the identifier since it was checked (two apps raced for it).
      throw Self.takenIdentifier(configuration.identifier, owner: nil)
    }
    // Reported through a delegate: its calls come on a dispatch queue, never waiting for a
    // thread of the cooperative pool (which a busy caller may hold).
    let delegate = ServiceSessionDelegate(service: self, identifier: configuration.identifier)
    let session = try DownloadSession(configuration: download, delegate: delegate)
    let hosted = HostedSession(session: session, settings: settings, bundleID: bundleText)
    let raced = state.withLock { state -> HostedSession? in
      if let other = state.hosted[configuration.identifier] { return other }
      state.hosted[configuration.identifier] = hosted
      return nil
    }
    if let raced {
      session.invalidate()
      return raced
    }
    // Completions settled before the events were read are in the store.
    flushDeliveries(configuration.identifier)
    return hosted
  }

  /// Gives the container's nsurlsessiond Downloads directory to the container's owner, so that the
  /// app's user can move a handed-over file out of it (`didFinishDownloadingTo`), as on iOS. The
  /// directory is held through a descriptor opened without following links.
  private func giveDownloadsToTheApp(_ bundle: BundleID) throws(ProtFSError) {
    guard geteuid() == 0 else { return }
    let container = device.container(bundle)
    let owner = try device.openDirectory(container.path).status()
    let downloads = try device.openDirectory(container.downloadsPath)
    let current = try downloads.status()
    guard current.uid != owner.uid || current.gid != owner.gid else { return }
    _ = try valueOrErrno(.chown) { fchown(downloads.fd, owner.uid, owner.gid) }.orThrow(
      "give the app's user", path: downloads.path)
  }

  /// Cancels `task` producing resume data, waiting for it.
  static func cancelProducingResumeData(_ task: DownloadTask) -> Data? {
    let done = DispatchSemaphore(value: 0)
    let box = Mutex<Data?>(nil)
    task.cancel { data in
      box.withLock { $0 = data }
      done.signal()
    }
    done.wait()
    return box.withLock { $0 }
  }

  /// The snapshot of `record` the app sees; `cancelledReason` is the reason the service recorded
  /// for it (`BackgroundTaskCancelledReason`'s raw value), which a task cancelled counts. Its
  /// resume data is Apple's (`AppleResumeData`).
  func snapshot(_ record: DownloadTaskRecord, cancelledReason: Int? = nil) -> SessionTaskSnapshot {
    let state: String
    switch record.state {
    // An interrupted task goes on when the service claims it, as nsurlsessiond's does.
    case .running, .waitingForUnlock, .interrupted: state = "running"
    case .suspended: state = "suspended"
    case .canceling: state = "canceling"
    case .completed, .failed: state = "completed"
    }
    let error =
      record.state == .failed
      ? record.failure ?? ProtFSError(.io, record.errorMessage ?? "The download failed.", errno: record.errorNumber)
      : nil
    let reason = error?.code == .cancelled ? cancelledReason.flatMap(BackgroundTaskCancelledReason.init) : nil
    let url = URL(string: record.url) ?? URL(fileURLWithPath: "/")
    if let upload = record.upload {
      // An upload's record counts the bytes sent and to send.
      return SessionTaskSnapshot(
        id: record.id, kind: .upload,
        request: SessionRequest(
          url: url, method: upload.method.rawValue,
          headers: upload.headers,
          taskDescription: record.taskDescription),
        state: state, bytesReceived: upload.responseBytes ?? 0, bytesExpectedToReceive: upload.responseBytes ?? -1,
        bytesSent: record.bytesReceived, bytesExpectedToSend: record.bytesExpected,
        statusCode: upload.responseStatus ?? 0, error: error, cancelledReason: reason)
    }
    return SessionTaskSnapshot(
      id: record.id, kind: .download,
      request: SessionRequest(
        url: url, method: record.requestMethod ?? "GET", headers: record.requestHeaders,
        taskDescription: record.taskDescription),
      state: state, bytesReceived: record.bytesReceived, bytesExpectedToReceive: record.bytesExpected,
      statusCode: record.response?.status ?? (record.state == .completed ? 200 : 0), error: error,
      cancelledReason: reason,
      resumeData: error.flatMap { Self.resumeData(record, $0) }.flatMap(Self.appleResumeData),
      responseHeaders: record.response?.headers)
  }

  /// The resume data of a download that failed keeping its temp file (cancelled, broken off, or
  /// stopped by the lock), as `cancel(byProducingResumeData:)` would have made it; nil otherwise.
  static func resumeData(_ record: DownloadTaskRecord, _ error: ProtFSError) -> Data? {
    guard record.state == .failed, record.isResumable, let temporary = record.temporaryFileName,
      [.cancelled, .network, .protectedDataUnavailable].contains(error.code), let url = URL(string: record.url)
    else { return nil }
    return DownloadResumeData(record: record, url: url, temporaryFileName: temporary).encoded()
  }

  /// The engine's resume data `data` (`DownloadResumeData`'s encoding) as Apple's, which the app
  /// gets.
  static func appleResumeData(_ data: Data) -> Data? {
    guard let engine = try? DownloadResumeData(data: data) else { return nil }
    var headers: [String: String] = [:]
    for header in engine.headers ?? [] { headers[header.name] = header.value }
    return AppleResumeData(
      url: engine.url, bytesReceived: engine.bytesReceived, temporaryFileName: engine.temporaryFileName,
      entityTag: engine.entityTag, serverDownloadDate: engine.lastModified, headers: headers
    ).archived
  }

  /// The download resume data `data` continues in `session`, and the task whose temp file it
  /// takes. The data is Apple's format, and the app may rewrite it as iOS apps do: what it names
  /// is checked against the store, which holds the truth. Its temp file must be one the session
  /// keeps for a download that failed resumable, its URL that download's, its byte count the bytes
  /// that file holds; everything else (directories, validators, request headers) is the record's,
  /// and the store hands the file over once. Anything else is refused (`resumeDataRefused`), and
  /// nothing is read or changed outside that temp file.
  func resumable(_ data: Data, in hosted: HostedSession) throws(ProtFSError) -> (DownloadResumeData, Int64) {
    let session = hosted.session.identifier
    let given = try AppleResumeData(data)
    let name = given.temporaryFileName
    guard
      let record = try store.tasks(session: session).first(where: {
        $0.temporaryFileName == name && $0.state == .failed && $0.isResumable
      })
    else {
      throw AppleResumeData.refusal(
        "its temp file '\(name)' is not one the session '\(session)' keeps for a download to continue")
    }
    guard record.url == given.url.absoluteString, let url = URL(string: record.url) else {
      throw AppleResumeData.refusal("it names another URL than the download whose temp file it names")
    }
    guard record.bytesReceived == given.bytesReceived else {
      throw AppleResumeData.refusal(
        "it counts \(given.bytesReceived) bytes received; the temp file holds \(record.bytesReceived)")
    }
    // The file comes back from the app's tmp/ (where a cancellation left it) to be continued.
    unparkPartialFile(name, bundleID: hosted.bundleID)
    return (DownloadResumeData(record: record, url: url, temporaryFileName: name), record.id)
  }
}
