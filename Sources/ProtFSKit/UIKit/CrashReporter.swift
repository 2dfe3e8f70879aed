import Foundation
import ProtFSApp
import ProtFSSystem

/// What iOS's crash reporter learns inside a crashing app: the thread that crashed. A ProtFSKit
/// app's crash handler sends it, with the signal, to its supervisor on its events socket as it
/// crashes (`CrashRecord`); the supervisor, which sees the signal itself, writes the crash report
/// (docs/apps.md).
enum CrashReporter {
  /// Installs the crash handler, once, before anything of the app runs.
  static func install() { _ = installed }

  private static let installed: Void = {
    guard let events = ProcessEnvironment.value(AppEnvironment.eventsFD).flatMap({ Int32($0) }), events >= 0 else {
      return
    }
    // A copy of its own: the record must not go to whatever file takes the events socket's number
    // once the app closed it.
    guard case .success(let copy) = Kernel.fcntl(events, F_DUPFD_CLOEXEC, 3) else { return }
    if case .failure = CrashRecord.installHandler(sendingOn: copy) { closeDescriptor(copy) }
  }()
}
