import ProtFSDownloads
import ProtFSSystem

/// The command line's words for a remedy: the library names the action, the CLI names the command.
extension Remedy {
  /// The remedy as a sentence fragment that names the protfs command to run.
  package var commandLine: String {
    switch self {
    case .unlock: "run `protfs unlock` first"
    case .setClass(let path): "set a class with `protfs set-class CLASS '\(path)'`"
    case .createContainer(let bundleID): "create it with `protfs init \(bundleID)`"
    case .initializeDevice(let root): "run `protfs --device \(root) init BUNDLE-ID` first"
    case .initializeDownloadsDirectory: "run `protfs init-cache` to give it NSFileProtectionNone"
    case .resumeAfterUnlock: "unlock it and resume the task, or run `protfs init-cache`"
    case .purgeCaches: "remove it with `protfs cache purge`, then download again"
    case .listTasks: "list the tasks with `protfs tasks`"
    case .resetPasscode:
      "remove the passcode hash from .protfs/lock-state.json and set a new one with `protfs passcode set`"
    case .retry(let operation): "fix the item, then run `protfs \(operation)` again"
    case .inspectJournal: "inspect it; removing it abandons the interrupted transition (run `protfs unlock` afterwards)"
    case .runAsRoot(let orChown):
      orChown ? "run protfs as root, or give the item to the device's owner with chown" : "run protfs as root"
    case .runAsDeviceOwner: "run protfs as the device's owner"
    case .listSessions: "`protfs sessions` lists them"
    case .startSessionService: "check `protfs sessions`; `protfs sessions start` as root starts it"
    case .restartSessionService: "check `protfs sessions`; `protfs sessions stop`, then start it again"
    case .useSessionFromItsApp: "run it as root, or from the app (`protfs app launch`)"
    case .confineAsRoot:
      "run protfs exec as root, outside a container or user namespace that restricts setuid and prctl"
    case .enableFuse:
      "make /dev/fuse available (`modprobe fuse`; in a container, pass /dev/fuse in) and run `protfs mount` as root"
    case .unmount(let mountpoint): "run `protfs unmount '\(mountpoint)'` first"
    case .advice(let text): text
    }
  }
}

extension ProtFSError {
  /// The message followed by the remedy in the command line's words: what the CLI prints.
  package var commandLineDescription: String { description(advice: \.commandLine) }
}

extension DownloadTaskRecord {
  /// Why the task failed, its remedy in the command line's words when the store kept the error whole.
  package var commandLineErrorText: String? { failure?.commandLineDescription ?? errorMessage }
}
