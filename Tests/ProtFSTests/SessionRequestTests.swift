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

  func open(_ identifier: String, bundleID: String? = nil) -> SessionServiceRequest {
    var request = SessionServiceRequest(.openSession, session: identifier)
    request.configuration = SessionConfiguration(identifier: identifier)
    request.configuration?.bundleID = bundleID
    return request
  }

  func create(_ session: String, _ url: String) -> SessionServiceRequest {
    var request = SessionServiceRequest(.createDownloadTask, session: session)
    request.request = SessionRequest(url: URL(string: url)!)
    return request
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
    #expect(try service.answer(SessionServiceRequest(.ping), peer: root).pid == getpid())
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
    #expect(error?.message.contains("is not running as app \(Self.other)") == true, "\(String(describing: error))")
    #expect(try service.store.tasks(session: "\(Self.other).s").isEmpty)
  }

  @Test func anAppNamesNoDestinationDirectory() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    var request = open("\(Self.app).s")
    request.destinationDirectory = t.device.stateDirectory
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
  }

  @Test func aRequestMissingWhatItNeedsNamesIt() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    let error = refusal { () throws(ProtFSError) in
      try service.answer(SessionServiceRequest(.openSession), peer: root)
    }
    #expect(error?.code == .invalidArgument && error?.message.contains("has no configuration") == true)
    let unknown = refusal { () throws(ProtFSError) in
      try service.answer(create("\(Self.app).nobody-opened", "http://127.0.0.1:9/x"), peer: root)
    }
    #expect(unknown?.code == .notFound, "\(String(describing: unknown))")
  }

  @Test func resumeDataTheServiceDidNotSealIsRefused() throws {
    let (t, service) = try service()
    defer { withExtendedLifetime(t) {} }
    try run(Self.app, on: t)
    _ = try service.answer(open("\(Self.app).s"), peer: appUser)
    var request = create("\(Self.app).s", "http://127.0.0.1:9/x")
    request.resumeData = DownloadResumeData(
      url: URL(string: "http://127.0.0.1:9/x")!, bytesReceived: 0, temporaryDirectory: t.device.stateDirectory,
      temporaryFileName: "lock-state.json", destinationDirectory: t.device.stateDirectory
    ).encoded()
    let error = refusal { () throws(ProtFSError) in try service.answer(request, peer: appUser) }
    #expect(error?.message.contains("not valid for the session") == true, "\(String(describing: error))")
    #expect(try service.store.tasks(session: "\(Self.app).s").isEmpty)
  }
}
