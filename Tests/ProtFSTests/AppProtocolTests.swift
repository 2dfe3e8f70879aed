import Foundation
import ProtFS
import ProtFSApp
import ProtFSSessions
import ProtFSSystem
import Testing

/// The app protocol's requests are typed, and both wire protocols carry errors alike.
@Suite struct AppProtocolTests {
  /// One request of every kind.
  static let samples: [AppRequest] = [
    .background, .foreground, .fetch, .terminate(byUser: true), .terminate(byUser: false),
    .beginTask(name: "upload"), .endTask(id: 7), .timeRemaining, .fetchCompleted(.newData),
    .sessionEvents(session: "com.example.bg"), .eventsHandled(session: "com.example.bg"), .startSessionService,
    .push(payload: #"{"aps":{"content-available":1}}"#), .pushCompleted(.failed), .watchMainThread,
    .mainThreadAnswered(event: 0), .mainThreadAnswered(event: 12), .uncaughtException(line: "*** Terminating app"),
    .setFetchInterval(seconds: 0), .setFetchInterval(seconds: nil), .bgTaskRegister(identifier: "com.example.r"),
    .bgTaskSubmit(
      BackgroundTaskMessage(
        identifier: "com.example.p", type: .processing, earliestBeginDate: Date(timeIntervalSince1970: 2e9),
        requiresNetworkConnectivity: true, requiresExternalPower: false)),
    .bgTaskCancel(identifier: "com.example.r"), .bgTaskCancel(identifier: nil), .bgTaskRequests,
    .bgTaskCompleted(identifier: "com.example.r", success: true),
    .bgTaskLaunch(BackgroundTaskMessage(type: .refresh, now: true)), .bgTaskExpire(identifier: "com.example.r"),
    .audio(playing: true), .locationUpdates(.background), .locationUpdates(.stop),
    .location(AppRequest.Coordinate(latitude: 48.8584, longitude: 2.2945)!),
  ]

  @Test func everyKindHasASample() {
    #expect(Set(Self.samples.map(\.kind)) == Set(AppRequest.Kind.allCases))
  }

  @Test(arguments: samples) func aRequestComesBackAsItWasSentWithItsValuesTyped(_ request: AppRequest) throws {
    let data = try JSONEncoder().encode(request)
    #expect(try JSONDecoder().decode(AppRequest.self, from: data) == request)
    let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    #expect(object["kind"] as? String == request.kind.rawValue && object["argument"] == nil, "\(object)")
  }

  /// What an app built by an older protfs sends (its ProtFSKit is compiled into it).
  @Test(arguments: [
    (#"{"kind":"endTask","argument":"3"}"#, AppRequest.endTask(id: 3)),
    (#"{"kind":"terminate","argument":"user"}"#, .terminate(byUser: true)),
    (#"{"kind":"terminate"}"#, .terminate(byUser: false)),
    (#"{"kind":"setFetchInterval","argument":"never"}"#, .setFetchInterval(seconds: nil)),
    (#"{"kind":"setFetchInterval","argument":"30"}"#, .setFetchInterval(seconds: 30)),
    (#"{"kind":"mainThreadAnswered","argument":"launch"}"#, .mainThreadAnswered(event: 0)),
    (#"{"kind":"audio","argument":"stop"}"#, .audio(playing: false)),
    (
      #"{"kind":"bgTaskCompleted","argument":"{\"identifier\":\"a\",\"success\":true}"}"#,
      .bgTaskCompleted(identifier: "a", success: true)
    ),
    (
      #"{"kind":"bgTaskSubmit","argument":"{\"identifier\":\"a\",\"type\":\"refresh\",\"earliestBeginDate\":2000000000}"}"#,
      .bgTaskSubmit(
        BackgroundTaskMessage(identifier: "a", type: .refresh, earliestBeginDate: Date(timeIntervalSince1970: 2e9)))
    ),
    (
      #"{"kind":"location","argument":"48.8584,2.2945"}"#,
      .location(AppRequest.Coordinate(latitude: 48.8584, longitude: 2.2945)!)
    ),
    (#"{"kind":"events-handled","argument":"s"}"#, .eventsHandled(session: "s")),
  ])
  func theOldFormIsStillRead(_ line: String, _ expected: AppRequest) throws {
    #expect(try JSONDecoder().decode(AppRequest.self, from: Data(line.utf8)) == expected)
  }

  /// A request whose value is of the wrong type, or out of range, is refused before anything
  /// reads it, saying what is wrong.
  @Test(arguments: [
    (#"{"kind":"endTask","task":"abc"}"#, "The request is not valid: a wrong value at 'task'."),
    (#"{"kind":"endTask"}"#, "The request is not valid: it has no 'task'."),
    (#"{"kind":"fetchCompleted","result":"lots"}"#, "The request is not valid: a wrong value at 'result'."),
    (#"{"kind":"audio","playing":"play"}"#, "The request is not valid: a wrong value at 'playing'."),
    (#"{"kind":"bgTaskSubmit","message":"{}"}"#, "The request is not valid: a wrong value at 'message'."),
    (#"{"kind":"fly"}"#, "The request is not valid: a wrong value at 'kind'."),
    ("{nope", "The request is not valid: it is not JSON."),
    (#"{"kind":"location","latitude":91,"longitude":0}"#, "'91.0,0.0' is not a location"),
    (#"{"kind":"setFetchInterval","seconds":-1}"#, "'-1.0' is not a fetch interval"),
    (#"{"kind":"endTask","argument":"abc"}"#, "'abc' is not an open background task."),
    (#"{"kind":"fetchCompleted","argument":"lots"}"#, "'lots' is not a fetch result"),
  ])
  func aMalformedRequestIsRefusedSayingWhy(_ line: String, _ message: String) {
    guard case .failure(let error) = AppSupervisor.request(line) else {
      Issue.record("\(line) was taken")
      return
    }
    #expect(error.code == .invalidArgument && error.message.hasPrefix(message), "\(error.message)")
  }

  @Test(.enabled(if: SupervisedApp.canSpeakAsAnotherUser))
  func aForgedRequestFromTheAppUserIsRefusedAndTheAppGoesOn() throws {
    let app = try SupervisedApp()
    defer { app.end() }
    let wrongType = try app.send(#"{"kind":"endTask","task":"1; terminate"}"#, asUser: 501)
    let refused = try JSONDecoder().decode(AppReply.self, from: Data(wrongType.utf8))
    #expect(refused.error?.message == "The request is not valid: a wrong value at 'task'.", "\(wrongType)")
    let notItsOwn = try JSONDecoder().decode(
      AppReply.self, from: Data(try app.send(#"{"kind":"terminate","user":true}"#, asUser: 501).utf8))
    #expect(notItsOwn.error?.code == .permissionDenied)
    #expect(notItsOwn.error?.message.contains("An app cannot ask for terminate itself (user 501") == true)
    let task = try JSONDecoder().decode(
      AppReply.self, from: Data(try app.send(#"{"kind":"beginTask","name":"upload"}"#, asUser: 501).utf8))
    #expect(task == .ok("1"))
    #expect(try app.record()?.state == .active)
  }

  @Test func bothProtocolsCarryAnErrorAlike() throws {
    let error = ProtFSError(
      .notFound, "The app com.example.gone is not running.", path: "/dev/x", syscall: .open, errno: ENOENT,
      remedy: .advice("launch it first"))
    let app = try JSONEncoder().encode(AppReply(error: error))
    let session = try JSONEncoder().encode(SessionServiceReply(error: error))
    let appError = try #require(
      (try JSONSerialization.jsonObject(with: app) as? NSDictionary)?["error"] as? NSDictionary)
    let sessionError = try #require(
      (try JSONSerialization.jsonObject(with: session) as? NSDictionary)?["error"] as? NSDictionary)
    #expect(appError == sessionError)
    #expect(try JSONDecoder().decode(AppReply.self, from: session).error == error)
    #expect(try JSONDecoder().decode(SessionServiceReply.self, from: app).error == error)
  }

  /// What a supervisor built by an older protfs answers an app built by a newer one.
  @Test func theOldReplyIsStillRead() throws {
    let reply = try JSONDecoder().decode(
      AppReply.self, from: Data(#"{"error":"Not in the plist.","code":"notPermitted"}"#.utf8))
    #expect(reply.error?.message == "Not in the plist." && reply.code == "notPermitted")
    let plain = try JSONDecoder().decode(AppReply.self, from: Data(#"{"error":"No."}"#.utf8))
    #expect(plain.error == ProtFSError(.refused, "No.") && plain.code == nil)
    #expect(try JSONDecoder().decode(AppReply.self, from: Data(#"{"value":"1"}"#.utf8)) == .ok("1"))
  }
}
