import ProtFS
import ProtFSDownloads
import ProtFSLock
import ProtFSMount
import ProtFSSessions
import ProtFSSystem

/// The command line's words for a remedy: the library names the action, the CLI names the command.
/// An action the CLI has no words for (a feature's new remedy) is worded as the library words it.
extension Remedy {
  /// The remedy as a sentence fragment that names the protfs command to run, spelled by `spelling`
  /// so that it acts on the device (and the app) the failed command did.
  package func commandLine(_ spelling: CommandSpelling) -> String {
    func run(_ words: String) -> String { spelling.command(words) }
    switch action {
    case .unlock: return "run \(run("unlock")) first"
    case .setClass: return "set a class with \(run("set-class CLASS '\(text("path"))'"))"
    case .createContainer: return "create it with \(run("init \(text("bundleID"))"))"
    case .initializeDevice:
      return "run \(CommandSpelling(device: text("root")).command("init \(spelling.bundleArgument)")) first"
    case .initializeDownloadsDirectory:
      return "run \(run("init-cache \(spelling.bundleArgument)")) to give it NSFileProtectionNone"
    case .resumeAfterUnlock:
      return "unlock it and resume the task, or run \(run("init-cache \(spelling.bundleArgument)"))"
    case .purgeCaches:
      return "remove it with \(run("cache purge" + (spelling.bundleID.map { " \($0)" } ?? ""))), then download again"
    case .listTasks: return "list the tasks with \(run("tasks"))"
    case .resetPasscode:
      return "remove the passcode hash from .protfs/lock-state.json and set a new one with \(run("passcode set"))"
    case .retry: return "fix the item, then run \(run(text("operation"))) again"
    case .inspectJournal:
      return "inspect it; removing it abandons the interrupted transition (run \(run("unlock")) afterwards)"
    case .runAsRoot:
      return flag("orChown")
        ? "run protfs as root, or give the item to the device's owner with chown" : "run protfs as root"
    case .runAsDeviceOwner: return "run protfs as the device's owner"
    case .listSessions: return "\(run("sessions")) lists them"
    case .startSessionService: return "check \(run("sessions")); \(run("sessions start")) as root starts it"
    case .restartSessionService: return "check \(run("sessions")); \(run("sessions stop")), then start it again"
    case .useSessionFromItsApp:
      return "run it as root, or from the app (\(run("app launch" + (spelling.bundleID.map { " \($0)" } ?? ""))))"
    case .resumeTask: return "\(run("tasks resume \(number("id") ?? 0)")) runs it in the foreground"
    case .confineAsRoot:
      return "run protfs exec as root, outside a container or user namespace that restricts setuid and prctl"
    case .enableFuse:
      return
        "make /dev/fuse available (`modprobe fuse`; in a container, pass /dev/fuse in) and run \(run("mount")) as root"
    case .unmount: return "run \(run("unmount '\(text("mountpoint"))'")) first"
    default: return advice
    }
  }
}

extension ProtFSError {
  /// The message followed by the remedy in the command line's words, spelled by `spelling`: what
  /// the CLI prints.
  package func commandLineDescription(_ spelling: CommandSpelling) -> String {
    description(advice: { $0.commandLine(spelling) })
  }
}

extension DownloadTaskRecord {
  /// Why the task failed, its remedy in the command line's words when the store kept the error
  /// whole: spelled by `spelling`, for the task's own app (its temp directory is named after it).
  package func commandLineErrorText(_ spelling: CommandSpelling) -> String? {
    var spelling = spelling
    if let name = temporaryDirectory.split(separator: "/").last, let app = try? BundleID(String(name)) {
      spelling.bundleID = app.rawValue
    }
    return failure?.commandLineDescription(spelling) ?? errorMessage
  }
}
