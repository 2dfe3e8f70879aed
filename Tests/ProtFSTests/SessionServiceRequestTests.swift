import Foundation
import ProtFS
import ProtFSSystem
import Testing

@testable import ProtFSSessions

/// The session service's requests on the wire: typed, each kind with its own values, and read
/// strictly, since apps and other users talk to the root service's socket.
@Suite struct SessionServiceRequestTests {
  static let configuration = SessionConfiguration(identifier: "com.example.app.s", bundleID: "com.example.app")
  static let request = SessionRequest(url: URL(string: "https://example.com/a.bin")!)

  /// One request of every kind, with values in every member it has.
  static let everyKind: [SessionServiceRequest] = [
    .ping,
    .openSession(configuration),
    .openSession(configuration, destinationDirectory: "/Documents"),
    .adopt(configuration, destinationDirectory: "/Documents", resuming: [1, 2]),
    .adopt(configuration, destinationDirectory: nil, resuming: []),
    .createDownloadTask(session: "s", request, resumeData: Data("resume".utf8)),
    .createDownloadTask(session: "s", request, resumeData: nil),
    .createUploadTask(session: "s", request, path: "/Documents/up.bin"),
    .resume(session: "s", task: 3, beginsAt: 1_700_000_000.5),
    .resume(session: "s", task: 3),
    .suspend(session: "s", task: 4),
    .cancel(session: "s", task: 5, producingResumeData: true),
    .cancel(session: "s", task: 5),
    .setDescription(session: "s", task: 6, text: "described"),
    .setDescription(session: "s", task: 6, text: nil),
    .tasks(session: "s"),
    .appTasks(session: "s", bundleID: "com.example.app"),
    .appTasks(session: nil, bundleID: nil),
    .prune(session: "s", bundleID: "com.example.app", olderThan: 60),
    .prune(session: nil, bundleID: nil, olderThan: nil),
    .subscribe(session: "s"),
    .invalidate(session: "s", cancelling: true),
    .invalidate(session: "s", cancelling: false),
    .acknowledge(session: "s", task: 7, fileOnly: true),
    .acknowledge(session: "s", task: 7),
    .eventsHandled(session: "s"),
    .markDelivered(session: "s"),
    .forceQuit(bundleID: "com.example.app"),
    .wake,
    .wait(tasks: [8, 9]),
    .stop,
  ]

  /// `request`'s JSON object, to change a member of it.
  static func object(_ request: SessionServiceRequest) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: try JSONEncoder().encode(request)) as? [String: Any])
  }

  /// The line of `object`.
  static func line(_ object: [String: Any]) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
  }

  /// The error the service answers `line` with, nil when it takes it.
  static func refusal(_ line: String) -> ProtFSError? {
    guard case .failure(let error) = SessionWire.request(line) else { return nil }
    return error
  }

  @Test func everyRequestComesBackAsItWasSent() throws {
    #expect(Set(Self.everyKind.map(\.kind)) == Set(SessionServiceRequest.Kind.allCases))
    for request in Self.everyKind {
      let line = SessionWire.line(request)
      #expect(try SessionWire.request(line).get() == request, "\(line)")
    }
  }

  /// The members keep the names the requests had before they were typed: a line an older app's
  /// ProtFSKit sends (it is compiled into the app) is read as it was, with the two members that
  /// are no longer sent (`session` with `openSession`, `bundleID` with `eventsHandled`).
  @Test func aRequestOfTheFormerShapeIsStillRead() throws {
    var open = try Self.object(.openSession(Self.configuration))
    open["session"] = Self.configuration.identifier
    #expect(SessionWire.request(try Self.line(open)) == .success(.openSession(Self.configuration)))
    let lines: [(String, SessionServiceRequest)] = [
      (#"{"kind":"eventsHandled","session":"s","bundleID":"com.example.app"}"#, .eventsHandled(session: "s")),
      (#"{"kind":"cancel","session":"s","task":5,"producingResumeData":false}"#, .cancel(session: "s", task: 5)),
      (#"{"kind":"acknowledge","session":"s","task":7}"#, .acknowledge(session: "s", task: 7)),
      (#"{"kind":"invalidate","session":"s"}"#, .invalidate(session: "s", cancelling: false)),
      (#"{"kind":"appTasks"}"#, .appTasks(session: nil, bundleID: nil)),
      (#"{"kind":"ping"}"#, .ping),
    ]
    for (line, request) in lines { #expect(SessionWire.request(line) == .success(request), "\(line)") }
  }

  /// A forged line: an unknown kind, a kind with another kind's values, a value of the wrong type,
  /// a kind without what it needs. Each is refused as it is read, with what is wrong.
  @Test(arguments: [
    (#"{"kind":"format-disk"}"#, "cannot read the request: a wrong value at 'kind'"),
    (#"{"session":"s"}"#, "cannot read the request: it has no 'kind'"),
    ("{nope", "cannot read the request: it is not JSON"),
    ("[1]", "The session service cannot read the request"),
    (#"{"kind":"createDownloadTask","task":"x"}"#, "cannot read the request: a wrong value at 'task'"),
    (#"{"kind":"ping","session":"s"}"#, "cannot read the request: a wrong value at 'session'"),
    (#"{"kind":"stop","task":1}"#, "cannot read the request: a wrong value at 'task'"),
    (#"{"kind":"forceQuit","bundleID":"b","session":"s"}"#, "cannot read the request: a wrong value at 'session'"),
    (#"{"kind":"suspend","session":"s","task":1,"path":"/etc"}"#, "a wrong value at 'path'"),
    (#"{"kind":"wait","tasks":[1],"destinationDirectory":"/"}"#, "a wrong value at 'destinationDirectory'"),
    (#"{"kind":"acknowledge","session":"s","task":1,"sneaky":true}"#, "a wrong value at 'sneaky'"),
    (#"{"kind":"tasks","session":"s","task":null}"#, "a wrong value at 'task'"),
    (#"{"kind":"resume","session":"s","task":"1"}"#, "cannot read the request: a wrong value at 'task'"),
    (#"{"kind":"subscribe","session":7}"#, "cannot read the request: a wrong value at 'session'"),
    (#"{"kind":"wait","tasks":"1,2"}"#, "cannot read the request: a wrong value at 'tasks'"),
    (#"{"kind":"resume","session":"s"}"#, "The request to the session service has no task."),
    (#"{"kind":"resume","task":1}"#, "The request to the session service has no session."),
    (#"{"kind":"openSession","session":"s"}"#, "The request to the session service has no configuration."),
    (#"{"kind":"forceQuit"}"#, "The request to the session service has no bundleID."),
    (#"{"kind":"wait"}"#, "The request to the session service has no tasks."),
  ])
  func aForgedRequestIsRefusedSayingWhy(_ line: String, _ message: String) {
    let error = Self.refusal(line)
    #expect(error?.code == .invalidArgument && error?.message.contains(message) == true, "\(String(describing: error))")
  }

  /// The values of one kind under another's name are refused: each kind takes its own members only.
  @Test func aKindWithAnotherKindsValuesIsRefused() throws {
    var upload = try Self.object(.createUploadTask(session: "s", Self.request, path: "/Documents/up.bin"))
    upload["kind"] = "createDownloadTask"
    #expect(Self.refusal(try Self.line(upload))?.message.contains("a wrong value at 'path'") == true)
    upload["kind"] = "suspend"
    #expect(Self.refusal(try Self.line(upload))?.message.contains("a wrong value at 'path'") == true)
    var adopt = try Self.object(.adopt(Self.configuration, destinationDirectory: nil, resuming: [1]))
    adopt["kind"] = "openSession"
    #expect(Self.refusal(try Self.line(adopt))?.message.contains("a wrong value at 'tasks'") == true)
    // An older peer's `session` beside a configuration is the configuration's, or nothing.
    var open = try Self.object(.openSession(Self.configuration))
    open["session"] = "com.example.other.s"
    #expect(Self.refusal(try Self.line(open))?.message.contains("a wrong value at 'session'") == true)
    var upload2 = try Self.object(.createUploadTask(session: "s", Self.request, path: "/Documents/up.bin"))
    upload2["path"] = nil
    #expect(Self.refusal(try Self.line(upload2))?.message == "The request to the session service has no path.")
    upload2["request"] = nil
    upload2["path"] = "/x"
    #expect(Self.refusal(try Self.line(upload2))?.message == "The request to the session service has no request.")
  }
}
