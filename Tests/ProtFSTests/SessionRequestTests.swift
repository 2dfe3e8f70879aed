import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFSSessions

/// The session service's answers to requests, called directly (no socket, no process): who may
/// ask what. The app is untrusted: a process of the app user is an app's only below its live
/// supervisor, and an app reaches its own sessions alone.
@Suite(.serialized) struct SessionRequestTests {
  static let app = "com.example.app"
  static let other = "com.example.other"

  /// Root, and the app user's process that this test process plays: an app's when its record
  /// names this process's parent as the live supervisor.
  let root = PeerCredentials(pid: getpid(), uid: 0, gid: 0)
  let appUser = PeerCredentials(pid: getpid(), uid: AppUser.standard.uid, gid: AppUser.standard.uid)

  /// A fresh device with both apps' containers and its service, not listening.
  func service() throws -> (TestDevice, SessionService) {
    let t = try TestDevice(containers: [Self.app, Self.other])
    return (t, try SessionService(device: t.device, launcher: nil))
  }

  /// Records `bundleID` as running, supervised by this process's parent: this process is its app.
  func run(_ bundleID: String, on t: TestDevice) throws {
    var record = AppRecord(bundleID: bundleID, backgroundTime: 30)
    record.state = .background
    record.supervisor = ProcessIdentity(pid: getppid())
    try AppStore(device: t.device).write(record)
  }

  func open(_ identifier: String, bundleID: String? = nil, destinationDirectory: String? = nil)
    -> SessionServiceRequest
  {
    .openSession(
      SessionConfiguration(identifier: identifier, bundleID: bundleID), destinationDirectory: destinationDirectory)
  }

  func create(
    _ session: String, _ url: String, resumeData: Data? = nil, _ change: (inout SessionRequest) -> Void = { _ in }
  ) -> SessionServiceRequest {
    var request = SessionRequest(url: URL(string: url)!)
    change(&request)
    return .createDownloadTask(session: session, request, resumeData: resumeData)
  }

  func refusal(_ body: () throws(ProtFSError) -> SessionServiceReply) -> ProtFSError? {
    do {
      _ = try body()
      return nil
    } catch {
      return error
    }
  }

  @Test func aPingIsAnsweredWithTheServicesPid() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    #expect(try service.answer(.ping, peer: root).pid == getpid())
  }

  @Test func theAppUserOutsideAnyAppOpensNoSession() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    let error = refusal { () throws(ProtFSError) in
      try service.answer(open("\(Self.app).s", bundleID: Self.app), peer: appUser)
    }
    #expect(error?.code == .permissionDenied && error?.errno == EPERM, "\(String(describing: error))")
    #expect(error?.message.contains("is not running as app \(Self.app)") == true)
    #expect(try service.store.serviceSessions().isEmpty)
  }

  @Test func anAppOpensItsOwnSessionAndNoOtherAppsOne() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    // Its own: the bundle id comes from its record, not from what it says.
    _ = try service.answer(open("\(Self.app).mine"), peer: appUser)
    #expect(try service.store.serviceSessions().map(\.identifier) == ["\(Self.app).mine"])
    // Another app's, by naming it: refused, and nothing is registered.
    let error = refusal { () throws(ProtFSError) in
      try service.answer(open("\(Self.other).theirs", bundleID: Self.other), peer: appUser)
    }
    #expect(error?.code == .permissionDenied, "\(String(describing: error))")
    #expect(try service.store.serviceSessions().count == 1)
  }

  @Test func anAppReachesNoTaskOfAnotherAppsSession() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    _ = try service.answer(open("\(Self.other).s", bundleID: Self.other), peer: root)
    try run(Self.app, on: t)
    let error = refusal { () throws(ProtFSError) in
      try service.answer(create("\(Self.other).s", "http://127.0.0.1:9/x"), peer: appUser)
    }
    // Told there is no such session, as for one nobody opened: not that it exists, nor whose it is.
    #expect(
      error?.code == .notFound && error?.message.contains(Self.other + "'") == false, "\(String(describing: error))")
    #expect(error?.message == SessionService.unknownSession("\(Self.other).s").message)
    #expect(try service.store.tasks(session: "\(Self.other).s").isEmpty)
  }

  @Test func anAppNamesNoDestinationDirectory() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    let request = open("\(Self.app).s", destinationDirectory: t.device.stateDirectory)
    let error = refusal { () throws(ProtFSError) in try service.answer(request, peer: appUser) }
    #expect(error?.code == .permissionDenied, "\(String(describing: error))")
    #expect(try service.store.serviceSessions().isEmpty)
  }

  @Test(arguments: ["file:///etc/shadow", "FILE:///etc/shadow", "ftp://127.0.0.1/x", "gopher://127.0.0.1/x"])
  func anAppsSessionTakesHttpAndHttpsOnly(url: String) throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    _ = try service.answer(open("\(Self.app).s"), peer: appUser)
    let error = refusal { () throws(ProtFSError) in try service.answer(create("\(Self.app).s", url), peer: appUser) }
    #expect(error?.code == .permissionDenied && error?.message.contains("only http and https") == true)
    #expect(try service.store.tasks(session: "\(Self.app).s").isEmpty)
    // Root's own sessions (download --detach) may name a file; nothing else changes for http.
    #expect(throws: Never.self) { try SessionService.checkFetchable(URL(string: "file:///tmp/x")!, for: root) }
    #expect(throws: Never.self) {
      try SessionService.checkFetchable(URL(string: "https://127.0.0.1/x")!, for: appUser)
    }
    // An http URL without a host is no request at all.
    for hostless in ["http:///etc/passwd", "https:"] {
      #expect(throws: ProtFSError.self) { try SessionService.checkFetchable(URL(string: hostless)!, for: appUser) }
    }
  }

  @Test func aRequestMissingWhatItNeedsNamesIt() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    // Such a request is refused as it is read: it is no request the service can be asked.
    let error = #expect(throws: ProtFSError.self) {
      try JSONDecoder().decode(SessionServiceRequest.self, from: Data(#"{"kind":"openSession","session":"s"}"#.utf8))
    }
    #expect(error?.code == .invalidArgument && error?.message.contains("has no configuration") == true)
    let unknown = refusal { () throws(ProtFSError) in
      try service.answer(create("\(Self.app).nobody-opened", "http://127.0.0.1:9/x"), peer: root)
    }
    #expect(unknown?.code == .notFound, "\(String(describing: unknown))")
  }

  /// Apple's resume data, which an app may rewrite, continues only a download the session keeps:
  /// the temp file it names must be one of the session's failed, resumable downloads, with that
  /// download's URL and byte count. Every other name, URL or count is refused
  /// (`resumeDataRefused`, `NSURLErrorCannotOpenFile` in the app) and no task is made.
  @Test func resumeDataNamingAnythingButADownloadTheSessionKeepsIsRefused() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    let session = "\(Self.app).s"
    _ = try service.answer(open(session), peer: appUser)
    _ = try service.answer(open("\(Self.app).other"), peer: appUser)
    let downloads = t.device.absolutePath(t.device.container(try BundleID(Self.app)).downloadsPath)
    func failed(_ session: String, _ name: String) throws -> DownloadTaskRecord {
      var record = DownloadTaskRecord(
        id: 0, sessionIdentifier: session, url: "http://127.0.0.1:9/x", destinationDirectory: downloads,
        fileName: nil, temporaryDirectory: downloads, temporaryFileName: name, state: .failed, bytesReceived: 100,
        bytesExpected: 1000, entityTag: "\"e\"", lastModified: nil, expectedSHA256: nil, errorMessage: "cancelled",
        errorNumber: ECANCELED, taskDescription: nil, createdAt: 0, updatedAt: 0)
      record.handsOver = true
      return try service.store.insert([record], owner: "test")[0]
    }
    let kept = try failed(session, "CFNetworkDownload_kept01.tmp")
    _ = try failed("\(Self.app).other", "CFNetworkDownload_other1.tmp")
    func attempt(_ data: AppleResumeData) -> ProtFSError? {
      let request = create(session, "http://127.0.0.1:9/x", resumeData: data.archived)
      return refusal { () throws(ProtFSError) in try service.answer(request, peer: appUser) }
    }
    let url = URL(string: "http://127.0.0.1:9/x")!
    let attacks: [(AppleResumeData, String)] = [
      (AppleResumeData(url: url, bytesReceived: 0, temporaryFileName: "lock-state.json"), "CFNetworkDownload_XXXXXX"),
      (AppleResumeData(url: url, bytesReceived: 0, temporaryFileName: "../../.protfs/x.tmp"), "CFNetworkDownload_"),
      (AppleResumeData(url: url, bytesReceived: 100, temporaryFileName: "CFNetworkDownload_other1.tmp"), "keeps"),
      (AppleResumeData(url: url, bytesReceived: 100, temporaryFileName: "CFNetworkDownload_nosuch.tmp"), "keeps"),
      (
        AppleResumeData(
          url: URL(string: "http://127.0.0.1:9/elsewhere")!, bytesReceived: 100,
          temporaryFileName: "CFNetworkDownload_kept01.tmp"), "another URL"
      ),
      (
        AppleResumeData(url: url, bytesReceived: 1 << 40, temporaryFileName: "CFNetworkDownload_kept01.tmp"),
        "holds 100"
      ),
      (
        AppleResumeData(
          url: URL(string: "file:///etc/shadow")!, bytesReceived: 100, temporaryFileName: "CFNetworkDownload_kept01.tmp"
        ),
        "http or https"
      ),
    ]
    for (data, words) in attacks {
      let error = attempt(data)
      #expect(
        error?.code == .resumeDataRefused && error?.message.contains(words) == true, "\(String(describing: error))")
    }
    for garbage in [Data(), Data("not a plist".utf8), Data(repeating: 0x41, count: 1 << 20)] {
      let request = create(session, "http://127.0.0.1:9/x", resumeData: garbage)
      let error = refusal { () throws(ProtFSError) in try service.answer(request, peer: appUser) }
      #expect(error?.code == .resumeDataRefused, "\(String(describing: error))")
    }
    #expect(try service.store.tasks(session: session).map(\.id) == [kept.id])
    // The data as the service made it continues the download, taking its temp file.
    let reply = try #require(
      try {
        let request = create(
          session, "http://127.0.0.1:9/x",
          resumeData: AppleResumeData(
            url: url, bytesReceived: 100, temporaryFileName: "CFNetworkDownload_kept01.tmp"
          ).archived)
        return try service.answer(request, peer: appUser).snapshot
      }())
    let made = try #require(try service.store.task(id: reply.id))
    #expect(made.temporaryFileName == "CFNetworkDownload_kept01.tmp" && made.bytesReceived == 100)
    #expect(try service.store.task(id: kept.id)?.temporaryFileName == nil)
  }

  /// What an app may put in a configuration is checked before anything is opened: a timeout of
  /// `1e300` seconds, converted to milliseconds, trapped the root service (every session's
  /// transfers stopped), as a connection count near `Int.max` would have.
  @Test(arguments: [
    ("requestTimeout", 1e300), ("resourceTimeout", 1e300), ("requestTimeout", -1), ("resourceTimeout", 0),
    ("requestTimeout", .nan), ("resourceTimeout", .infinity), ("connectionsPerHost", Double(Int.max)),
    ("connectionsPerHost", 0), ("identifier", 0), ("identifier", 1), ("identifier", 2),
  ])
  func aConfigurationWithValuesTheServiceCannotRunIsRefusedAndTheServiceGoesOn(field: String, value: Double) throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    var configuration = SessionConfiguration(identifier: "\(Self.app).s")
    switch field {
    case "requestTimeout": configuration.requestTimeout = value
    case "resourceTimeout": configuration.resourceTimeout = value
    case "connectionsPerHost": configuration.connectionsPerHost = value > 1e18 ? Int.max : Int(value)
    default:
      configuration.identifier = ["", "\(Self.app).a\nforged line", String(repeating: "x", count: 5000)][Int(value)]
    }
    let request = SessionServiceRequest.openSession(configuration)
    for peer in [appUser, root] {
      let error = refusal { () throws(ProtFSError) in try service.answer(request, peer: peer) }
      #expect(error?.code == .invalidArgument, "\(field) \(value): \(String(describing: error))")
    }
    #expect(try service.store.serviceSessions().isEmpty)
    // ProtFSKit brings what an iOS app sets into range instead (iOS bounds it itself).
    let clamped = configuration.clamped()
    if field != "identifier" { #expect(throws: Never.self) { try clamped.validate() } }
    _ = try service.answer(open("\(Self.app).s"), peer: appUser)
    #expect(try service.store.serviceSessions().map(\.identifier) == ["\(Self.app).s"])
  }

  /// App B once reached app A's hosted session by naming B's own bundle and A's session
  /// identifier: the service authorised B for B, then returned the session it hosted under that
  /// identifier, resumed A's tasks for B and cleared A's pending wake.
  @Test(arguments: [false, true]) func anAppNamingAnotherAppsSessionIdentifierReachesNothingOfIt(adopt: Bool) throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    let theirs = "\(Self.other).s"
    _ = try service.answer(open(theirs, bundleID: Self.other), peer: root)
    let created = try service.answer(create(theirs, "http://127.0.0.1:9/x"), peer: root)
    let id = try #require(created.snapshot?.id)
    _ = service.state.withLock { $0.launchNotified.insert(theirs) }
    try run(Self.app, on: t)
    for bundleID in [Self.app, nil] {
      let configuration = SessionConfiguration(identifier: theirs, bundleID: bundleID)
      let request: SessionServiceRequest =
        adopt
        ? .adopt(configuration, destinationDirectory: nil, resuming: [id]) : open(theirs, bundleID: bundleID)
      let error = refusal { () throws(ProtFSError) in try service.answer(request, peer: appUser) }
      #expect(error?.code == .alreadyExists, "\(String(describing: error))")
      #expect(error?.message.contains("belongs to another app") == true, "\(String(describing: error))")
      #expect(error?.message.contains("'\(Self.other)'") == false, "another app's bundle id is not told")
    }
    #expect(try service.store.task(id: id)?.state == .suspended)
    #expect(service.state.withLock { $0.launchNotified.contains(theirs) })
    // Nor by the service's own call: a hosted session is returned to its app only.
    var settings = HostedSessionSettings(
      configuration: SessionConfiguration(identifier: theirs), destinationDirectory: nil)
    settings.configuration.bundleID = Self.app
    #expect(throws: ProtFSError.self) { try service.host(settings) }
    // Root is told whose it is.
    let toRoot = refusal { () throws(ProtFSError) in try service.answer(open(theirs, bundleID: Self.app), peer: root) }
    #expect(toRoot?.message.contains("the app '\(Self.other)'") == true, "\(String(describing: toRoot))")
  }

  /// One app opened sessions without end (each holds a thread and descriptors, and every start
  /// reopens them all) until the service ran out of descriptors for every app; another made
  /// tasks with 1.5 MB descriptions until root's shared store was 304 MB. Both are bounded.
  @Test func anAppsSessionsTasksAndDescriptionsAreBounded() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    // Each with a task it has not finished: a session that holds nothing makes room (below).
    for n in 0..<SessionService.maximumSessionsPerApp {
      _ = try service.answer(open("\(Self.app).s\(n)"), peer: appUser)
      _ = try service.answer(create("\(Self.app).s\(n)", "http://127.0.0.1:9/x"), peer: appUser)
    }
    let more = refusal { () throws(ProtFSError) in try service.answer(open("\(Self.app).more"), peer: appUser) }
    #expect(more?.message.contains("32 background sessions") == true, "\(String(describing: more))")
    // Its own sessions open again; root is not counted.
    _ = try service.answer(open("\(Self.app).s0"), peer: appUser)
    _ = try service.answer(open("\(Self.app).root", bundleID: Self.app), peer: root)

    let long = create("\(Self.app).s0", "http://127.0.0.1:9/x") {
      $0.taskDescription = String(repeating: "d", count: SessionService.maximumDescriptionLength + 1)
    }
    let described = refusal { () throws(ProtFSError) in try service.answer(long, peer: appUser) }
    #expect(described?.code == .invalidArgument, "\(String(describing: described))")
    let huge = create("\(Self.app).s0", "http://127.0.0.1:9/" + String(repeating: "u", count: 20_000)) {
      $0.headers = []
    }
    #expect(refusal { () throws(ProtFSError) in try service.answer(huge, peer: appUser) }?.code == .invalidArgument)
    let id = try #require(
      try service.answer(create("\(Self.app).s0", "http://127.0.0.1:9/x"), peer: appUser).snapshot?.id)
    let set = SessionServiceRequest.setDescription(
      session: "\(Self.app).s0", task: id, text: String(repeating: "d", count: 5000))
    #expect(refusal { () throws(ProtFSError) in try service.answer(set, peer: appUser) }?.code == .invalidArgument)
    #expect(try service.store.unfinishedTaskCount(sessions: ["\(Self.app).s0"]) == 2)
  }

  /// An app that invalidates a session (`invalidateAndCancel`, `finishTasksAndInvalidate`) is done
  /// with it, as on iOS: its unfinished tasks are cancelled when asked, and once none is left the
  /// service forgets it, so that its identifier names a new, empty session and it no longer counts
  /// among the app's 32. Before, nothing reached the service, and an app that gave each launch's
  /// session a new identifier was refused every session from its 33rd launch on.
  @Test func anInvalidatedSessionIsForgottenAndFreesItsPlace() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    var tasks: [Int64] = []
    for n in 0..<SessionService.maximumSessionsPerApp {
      _ = try service.answer(open("\(Self.app).s\(n)"), peer: appUser)
      tasks.append(
        try #require(
          try service.answer(create("\(Self.app).s\(n)", "http://127.0.0.1:9/x"), peer: appUser).snapshot?.id))
    }
    // Without cancelling, a session whose task is unfinished stays, task and all.
    _ = try service.answer(.invalidate(session: "\(Self.app).s1", cancelling: false), peer: appUser)
    #expect(try service.store.task(id: tasks[1])?.state == .suspended)
    #expect(try service.store.sessions().contains { $0.identifier == "\(Self.app).s1" })
    // Cancelling: the task ends, and the session goes from the service and the store.
    _ = try service.answer(.invalidate(session: "\(Self.app).s0", cancelling: true), peer: appUser)
    #expect(service.state.withLock { $0.hosted["\(Self.app).s0"] } == nil)
    #expect(try !service.store.sessions().contains { $0.identifier == "\(Self.app).s0" })
    #expect(try service.store.task(id: tasks[0]) == nil)
    // Its place is free, and its identifier names a new session without the old task.
    _ = try service.answer(open("\(Self.app).more"), peer: appUser)
    _ = try service.answer(open("\(Self.app).s0"), peer: appUser)
    #expect(try service.answer(.tasks(session: "\(Self.app).s0"), peer: appUser).snapshots == [])
    // Nor can it invalidate another app's session: it is as unknown to it as any other.
    _ = try service.answer(open("\(Self.other).s", bundleID: Self.other), peer: root)
    let their = try #require(
      try service.answer(create("\(Self.other).s", "http://127.0.0.1:9/x"), peer: root).snapshot?.id)
    let theirs = SessionServiceRequest.invalidate(session: "\(Self.other).s", cancelling: true)
    let refused = refusal { () throws(ProtFSError) in try service.answer(theirs, peer: appUser) }
    #expect(refused?.code == .notFound, "\(String(describing: refused))")
    #expect(try service.store.task(id: their)?.state == .suspended)
  }

  /// An app at its limit whose sessions hold nothing (no unfinished task, no completion owed to
  /// it) and that it does not follow now opens a new one: the oldest idle session makes room.
  @Test func anIdleSessionMakesRoomForANewOne() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    for n in 0..<SessionService.maximumSessionsPerApp {
      _ = try service.answer(open("\(Self.app).s\(n)"), peer: appUser)
    }
    _ = try service.answer(open("\(Self.app).new"), peer: appUser)
    let identifiers = try service.store.sessions().map(\.identifier)
    #expect(identifiers.count == SessionService.maximumSessionsPerApp)
    #expect(identifiers.contains("\(Self.app).new") && !identifiers.contains("\(Self.app).s0"), "\(identifiers)")
  }

  /// A `wait` held its connection (one of the app's few) and a thread after the app hung up,
  /// until the task settled; it now ends once the peer is gone.
  @Test(.timeLimit(.minutes(1))) func aWaitWhosePeerHungUpEnds() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    _ = try service.answer(open("\(Self.app).s", bundleID: Self.app), peer: root)
    let id = try #require(try service.answer(create("\(Self.app).s", "http://127.0.0.1:9/x"), peer: root).snapshot?.id)
    let wait = SessionServiceRequest.wait(tasks: [id])
    let error = refusal { () throws(ProtFSError) in try service.answer(wait, peer: root) { true } }
    #expect(error?.message.contains("went away") == true, "\(String(describing: error))")
  }

  /// Two apps racing for one identifier: the loser was told the winner's bundle id by the store.
  @Test func theAppLosingARaceForAnIdentifierIsNotToldTheWinner() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try service.store.registerSession(identifier: "shared", bundleID: Self.other)
    var settings = HostedSessionSettings(
      configuration: SessionConfiguration(identifier: "shared"), destinationDirectory: nil)
    settings.configuration.bundleID = Self.app
    do {
      try service.host(settings)
      Issue.record("hosted another app's identifier")
    } catch {
      #expect(error.code == .alreadyExists && error.message.contains("belongs to another app"), "\(error)")
      #expect(!error.message.contains(Self.other), "\(error)")
    }
  }
}
