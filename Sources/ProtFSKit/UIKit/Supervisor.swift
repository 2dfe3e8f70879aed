import Foundation
import ProtFSApp
import ProtFSSystem

/// The supervisor of the app this program runs as (`protfs app launch`), reached from any thread:
/// what BGTaskScheduler, AVAudioSession, CLLocationManager and an uncaught exception tell the
/// system. `UIApplication` speaks to it through the same socket.
enum Supervisor {
  /// Its socket's abstract name (without the `@`), when the program runs as an app.
  static let socketName: String? = {
    guard let socket = ProcessEnvironment.value(AppEnvironment.socket), socket.hasPrefix("@"),
      socket.count > 1
    else { return nil }
    return String(socket.dropFirst())
  }()

  /// Sends `request`: the supervisor's reply, or a refusal (`unavailable`) when the program is no
  /// app or its supervisor did not answer.
  static func send(_ request: AppRequest) -> AppReply {
    guard let socketName else { return .refused("The program is not running as an app.", .unavailable) }
    return (try? AppClient.send(request, to: socketName))
      ?? .refused("The app's supervisor did not answer.", .unavailable)
  }
}
