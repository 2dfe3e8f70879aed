import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The sessions the service hosts: which a request names, and how one is hosted, invalidated
/// and forgotten.
extension SessionService {
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

  /// The hosted session `identifier`, opened from the store when it is a service session not open
  /// yet, after the peer check.
  func session(_ identifier: String, peer: Peer) throws(ProtFSError) -> HostedSession {
    let bundle = try bundleOf(identifier)
    try authorize(peer, bundleID: bundle, session: identifier)
    if let existing = state.withLock({ $0.hosted[identifier] }) { return existing }
    let json = try store.serviceSessions().first { $0.identifier == identifier }?.configuration
    guard let json else { throw Self.unknownSession(identifier) }
    return try host(HostedSessionSettings.decode(json, session: identifier).get())
  }

  /// The sessions whose tasks `peer` may list and prune: its app's, or `wanted` alone when it is
  /// one of them; root names the app with `bundleID`, or has every app's. A process that is no app
  /// and not root has none: it is refused.
  func sessions(_ wanted: String?, bundleID: String?, peer: Peer) throws(ProtFSError) -> [String] {
    let bundle: String?
    if peer.isTrustedUser {
      bundle = bundleID
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
    if let wanted {
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

  static func missing(_ what: String) -> ProtFSError { SessionServiceRequest.missing(what) }

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
  func giveDownloadsToTheApp(_ bundle: BundleID) throws(ProtFSError) {
    guard Kernel.geteuid() == 0 else { return }
    let container = device.container(bundle)
    let owner = try device.openDirectory(container.path).status()
    let downloads = try device.openDirectory(container.downloadsPath)
    let current = try downloads.status()
    guard current.uid != owner.uid || current.gid != owner.gid else { return }
    _ = try Kernel.fchown(downloads.fd, owner.uid, owner.gid).orThrow(
      "give the app's user", path: downloads.path)
  }
}
