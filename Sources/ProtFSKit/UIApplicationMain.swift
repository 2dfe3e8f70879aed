import Foundation
import ProtFSApp

extension UIApplication {
  /// Runs the app, as `UIApplicationMain` does: tells `delegate` it launched, then reads the
  /// supervisor's events on a thread of their own and delivers each on the main queue (delegate
  /// methods, notifications and expiration handlers all run there, as on iOS) while the main
  /// queue runs. Never returns: the process ends with `exit(0)` after `applicationWillTerminate`,
  /// or by the supervisor's SIGKILL.
  public static func main(delegate: any UIApplicationDelegate) -> Never {
    let app = shared
    app.delegate = delegate
    _ = delegate.application(app, didFinishLaunchingWithOptions: nil)
    let descriptor = app.eventsDescriptor
    Thread { AppEventReader.run(descriptor) }.start()
    dispatchMain()
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
}

/// Reads the events, one JSON line each, and hands them to the main queue in order.
enum AppEventReader {
  /// Reads `descriptor` until it ends (the supervisor is gone; its parent-death signal ends the app).
  static func run(_ descriptor: Int32) {
    var pending: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = read(descriptor, &chunk, chunk.count)
      if count < 0 {
        if errno == EINTR { continue }
        guard errno == EAGAIN else { return }
        var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&waiting, 1, -1)
        continue
      }
      if count == 0 { return }
      pending += chunk[..<count]
      while let newline = pending.firstIndex(of: 0x0A) {
        let line = Data(pending[..<newline])
        pending.removeSubrange(...newline)
        guard let event = try? JSONDecoder().decode(AppEventLine.self, from: line) else { continue }
        DispatchQueue.main.async { MainActor.assumeIsolated { UIApplication.shared.handle(event) } }
      }
    }
  }
}
