import Foundation
import ProtFSApp
import ProtFSSystem
import Synchronization

/// Runs the app as UIKit's `UIApplicationMain` does, for the iOS `main.swift` that calls it:
/// `UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil,
/// NSStringFromClass(AppDelegate.self))`. Makes an instance of the delegate class with its
/// `init()` (a class that inherits from `UIResponder`, as Xcode's template declares it, or from
/// `NSObject`, as older templates and much sample code do) and runs `UIApplication.main(delegate:)`.
/// Never returns. Call it from the main thread; `principalClassName` must be nil or
/// `UIApplication` (there are no subclasses here).
@discardableResult
public func UIApplicationMain(
  _ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, _ principalClassName: String?,
  _ delegateClassName: String?
) -> Int32 {
  CrashReporter.install()
  PrewarmHold.waitForLaunch()
  if let principalClassName, principalClassName != "UIApplication",
    principalClassName != NSStringFromClass(UIApplication.self)
  {
    UIApplication.stop("the principal class \(principalClassName) is not UIApplication; pass nil")
  }
  guard let delegateClassName else {
    UIApplication.stop(
      "no delegate class was named (there is no storyboard to find one in); "
        + "pass NSStringFromClass(AppDelegate.self)")
  }
  guard let found = NSClassFromString(delegateClassName) else {
    UIApplication.stop(
      "there is no class named \(delegateClassName); pass NSStringFromClass(AppDelegate.self), "
        + "which names the class with its module")
  }
  guard let type = found as? NSObject.Type else {
    UIApplication.stop(
      "the delegate class \(delegateClassName) does not inherit from NSObject "
        + "(declare it `class AppDelegate: UIResponder, UIApplicationDelegate`)")
  }
  guard Thread.isMainThread else { UIApplication.stop("UIApplicationMain was called off the main thread") }
  MainActor.assumeIsolated { () -> Never in
    guard let made = makeDelegate(type) else {
      UIApplication.stop(
        "the delegate class \(delegateClassName) cannot be made: this Swift runtime or Foundation has no "
          + "NSObject.init to look up (declare it `class AppDelegate: UIResponder, UIApplicationDelegate`)")
    }
    guard let delegate = made as? any UIApplicationDelegate else {
      UIApplication.stop("the delegate class \(delegateClassName) does not conform to UIApplicationDelegate")
    }
    UIApplication.main(delegate: delegate)
  }
}

/// An instance of the delegate class `type`, with its `init()`: `UIResponder`'s is `required`, so
/// its subclasses are made as Swift makes any class; a class that inherits from `NSObject` alone
/// is made through its vtable, as UIKit makes it through the Objective-C runtime (`ObjectMaker`).
/// On the main actor, as `UIResponder` and UIKit's own making of the delegate are.
@MainActor private func makeDelegate(_ type: NSObject.Type) -> NSObject? {
  if let responder = type as? UIResponder.Type { return responder.init() }
  return ObjectMaker.make(type)
}

extension UIApplicationDelegate {
  /// The entry point of an `@main` app delegate, as UIKit's: runs `UIApplicationMain` with this
  /// class as the delegate (which inherits from `UIResponder`, as Xcode's template does, or from
  /// `NSObject`).
  public static func main() {
    UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil, NSStringFromClass(self))
  }
}

extension UIApplication {
  /// Runs the app, as `UIApplicationMain` does: tells `delegate` it launched (and, for a
  /// foreground launch, that it became active), reads the supervisor's events on a thread of
  /// their own and runs the main run loop on this thread, the app's main thread. Every delegate
  /// method, notification and expiration handler runs there, as does `DispatchQueue.main`,
  /// `OperationQueue.main` and `Timer.scheduledTimer` work (which stops while the app is
  /// suspended, and goes on when it resumes). Never returns: the process ends with `exit(0)`
  /// after `applicationWillTerminate`, or by the supervisor's SIGKILL.
  public static func main(delegate: any UIApplicationDelegate) -> Never {
    CrashReporter.install()
    PrewarmHold.waitForLaunch()
    // The app's print() reaches `protfs app launch`'s output a line at a time, as Xcode's console.
    Kernel.lineBufferStandardOutput()
    let app = shared
    app.delegate = delegate
    UIApplication.mainLoopRuns.store(true, ordering: .releasing)
    // The system's watchdog watches the main thread from here: a launch, and every event after it,
    // must return in time, or the app is killed as iOS kills an app whose main thread is blocked.
    // The launch runs while the supervisor takes the request; its answer is waited for before the
    // launch is reported done, so that the supervisor takes the two in order.
    let watching = try? AppClient.begin(.watchMainThread, to: app.socketName)
    // No options, as iOS gives none for a user's launch or a background launch for a session's
    // events or a fetch.
    _ = delegate.application(app, willFinishLaunchingWithOptions: nil)
    _ = delegate.application(app, didFinishLaunchingWithOptions: nil)
    _ = try? watching?.reply()
    _ = app.send(.mainThreadAnswered(event: 0))
    NotificationCenter.default.post(name: didFinishLaunchingNotification, object: nil)
    if app.applicationState == .inactive {
      // A foreground launch connects the app's scene (if it uses scenes), which then enters the
      // foreground, as iOS 13 and later launch a scene-based app.
      app.connectSceneIfNeeded()
      if app.scene != nil { app.enterForeground() }
      app.becomeActive()
    }
    let descriptor = app.eventsDescriptor
    Thread { AppEventReader.run(descriptor) }.start()
    // The run loop returns when it has nothing to wait for; a timer that never fires keeps it.
    RunLoop.main.add(Timer(timeInterval: .greatestFiniteMagnitude, repeats: false) { _ in }, forMode: .common)
    while true { _ = RunLoop.main.run(mode: .default, before: .distantFuture) }
  }

  /// Whether `main(delegate:)` runs the main thread's run loop (from before the launch): work queued
  /// on the main queue from the main thread runs once the current event returns.
  nonisolated static let mainLoopRuns = Atomic<Bool>(false)

  /// Stops a program that cannot run as an app, with `problem` on standard error (exit 70, as a
  /// crash in launch would end it).
  nonisolated static func stop(_ problem: String) -> Never {
    FileHandle.standardError.write(Data("UIApplicationMain: \(problem)\n".utf8))
    exit(70)
  }
}

/// One event line: `{"event":"…"}`, with the task's id and name for `backgroundTaskWillExpire`.
struct AppEventLine: Decodable, Sendable {
  /// The event's name (`AppEvent`'s raw value).
  var event: String
  /// The task whose time runs out.
  var task: Int?
  /// Its name.
  var name: String?
  /// The background session whose events wait (`handleEventsForBackgroundURLSession`).
  var session: String?
  /// The event's number, which the main thread answers once it handled the event.
  var number: Int?
  /// The BGTask it is about (`bgTaskLaunch`, `bgTaskExpiration`).
  var identifier: String?
  /// The BGTask's kind (`refresh`, `processing`).
  var type: String?
  /// A location's latitude (`didUpdateLocations`).
  var latitude: Double?
  /// Its longitude.
  var longitude: Double?
  /// A remote notification's payload (`didReceiveRemoteNotification`), as JSON; read apart from
  /// the rest, since it is any JSON object.
  var userInfo: Data?

  enum CodingKeys: String, CodingKey { case event, task, name, session, number, identifier, type, latitude, longitude }

  /// Decodes `line`, its payload included.
  static func decode(_ line: Data) -> AppEventLine? {
    guard var event = try? JSONDecoder().decode(AppEventLine.self, from: line) else { return nil }
    if event.event == AppEvent.didReceiveRemoteNotification.rawValue,
      let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
      let payload = object["userInfo"] as? [String: Any]
    {
      event.userInfo = try? JSONSerialization.data(withJSONObject: payload)
    }
    return event
  }
}

/// Reads the events, one JSON line each, and hands them to the main thread in order.
enum AppEventReader {
  /// Reads `descriptor` until it ends (the supervisor is gone; its parent-death signal ends the app).
  static func run(_ descriptor: Int32) {
    var pending: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count: Int
      switch Kernel.read(descriptor, &chunk, chunk.count) {
      case .success(let read): count = read
      case .failure(let e) where e.rawValue == EAGAIN:
        var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        _ = Kernel.poll(&waiting, 1, -1)
        continue
      case .failure: return
      }
      if count == 0 { return }
      pending += chunk[..<count]
      while let newline = pending.firstIndex(of: 0x0A) {
        let line = Data(pending[..<newline])
        pending.removeSubrange(...newline)
        guard let event = AppEventLine.decode(line) else { continue }
        DispatchQueue.main.async {
          MainActor.assumeIsolated {
            let app = UIApplication.shared
            app.handle(event)
            if let number = event.number { _ = app.send(.mainThreadAnswered(event: number)) }
          }
        }
      }
    }
  }
}

/// A step of prewarming (its name is printed once, for the runtime's reflection to be ready).
private enum PrewarmStep { case held, launched }

/// iOS 15's prewarming: a process started ahead of its launch (`protfs app prewarm`) runs up to
/// `UIApplicationMain` and is held there, before the delegate is made, until a launch takes it.
enum PrewarmHold {
  /// Returns at once unless the app is prewarmed. Then tells the supervisor that the app is held (a
  /// `held` line on the events socket) and waits for the launch: an `activate` line carrying the
  /// launch's standard input, output and error, which become this process's. Ends the process
  /// quietly when the supervisor goes away first (the prewarmed app was discarded).
  ///
  /// Before it waits it does what any launch does first and no app code sees: the first use of the
  /// supervisor's codec, of block observers on the notification center, and of the runtime's
  /// reflection.
  static func waitForLaunch() {
    guard ProcessEnvironment.value(AppEnvironment.prewarm) == "1" else { return }
    Kernel.unsetenv(AppEnvironment.prewarm)
    // Done while held, as iOS has its frameworks ready in a prewarmed process: the first use of the
    // codec (which makes its types' metadata), of block observers, and of the runtime's
    // reflection (which `"\(state)"` of an enum uses), a few hundred microseconds each.
    _ = try? JSONEncoder().encode(AppRequest.watchMainThread)
    _ = try? JSONDecoder().decode(AppReply.self, from: Data(#"{"value":"1"}"#.utf8))
    let observer = NotificationCenter.default.addObserver(
      forName: Notification.Name("ProtFSKitPrewarm"), object: nil, queue: nil
    ) { _ in }
    NotificationCenter.default.removeObserver(observer)
    _ = String(describing: PrewarmStep.held)
    let events = FileDescriptor(owning: AppEnvironment.eventsDescriptor)
    defer { _ = events.take() }
    guard ControlSocket.writeAll(Array("held\n".utf8), on: events) else { exit(0) }
    while true {
      guard let (bytes, descriptors) = try? DescriptorPassing.receive(on: events, limit: 256), !bytes.isEmpty else {
        exit(0)
      }
      guard descriptors.count == 3, let line = String(validating: bytes, as: UTF8.self),
        line.hasPrefix(#"{"event":"activate""#)
      else { continue }
      for (number, descriptor) in descriptors.enumerated() {
        _ = Kernel.dup2(descriptor.rawValue, Int32(number))
      }
      Kernel.setenv(
        AppEnvironment.protectedData, line.contains(#""protectedData":"unavailable""#) ? "unavailable" : "available", 1)
      return
    }
  }
}
