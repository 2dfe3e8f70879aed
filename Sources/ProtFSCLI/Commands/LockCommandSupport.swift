import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem

/// The crash test hook, set once from `PROTFS_CRASH_AFTER` (a step number) for the whole process,
/// so the recovery that runs before a command and the command itself count steps together.
package let crashHook = CrashHook.fromEnvironment()

extension Invocation {
  /// The lock controller of the chosen device.
  package var lockController: LockController {
    var controller = LockController(device: device, crashHook: crashHook)
    if let iterations = environment["PROTFS_PBKDF2_ITERATIONS"].flatMap(Int.init), iterations > 0 {
      controller.passcodeIterations = iterations  // tests make hashing cheap; users never need this
    }
    let timeout = Int(controller.mountSync.timeout)
    controller.mountSync.lagging = { mountpoint in
      Console.err(
        "warning: the mount at '\(mountpoint)' did not take the new state within \(timeout) s; until it does, pages it cached may still be served."
      )
    }
    return controller
  }

  /// A passcode from `--NAME`, else the file of `--NAME-file` (`-`: standard input), else the
  /// environment variable, else (with a `prompt`) a prompt on the terminal; nil when none.
  package func passcode(_ option: PasscodeOption, prompt: String?) throws -> String? {
    if value(option.code) != nil, value(option.file) != nil {
      throw usageError("Give --\(option.code.long) or --\(option.file.long), not both.")
    }
    if let value = value(option.code) {
      // Kept for the scripts that give it, as import-backup has --password-file and no --password.
      let ways =
        ["--\(option.file.long) FILE (- for standard input)", "$\(option.environmentKey)"]
        + (prompt == nil ? [] : ["the prompt"])
      Console.err(
        "warning: --\(option.code.long) puts the passcode where other users can read it (ps, /proc/PID/cmdline) while protfs starts; give it with \(ways.dropLast().joined(separator: ", ")) or \(ways.last!) instead."
      )
      return value
    }
    if let path = value(option.file) { return try PasscodeFile.read(path, option: option.file.long) }
    if let value = environment[option.environmentKey] { return value }
    guard let prompt, Kernel.isatty(STDIN_FILENO) == 1 else { return nil }
    return Terminal.readSecret(prompt)
  }

  /// Whether `passcode(option, prompt:)` would ask on the terminal: no option, no variable, and
  /// standard input a terminal.
  package func promptsFor(_ option: PasscodeOption) -> Bool {
    value(option.code) == nil && value(option.file) == nil && environment[option.environmentKey] == nil
      && Kernel.isatty(STDIN_FILENO) == 1
  }

  /// Refuses two passcode options that would both read standard input.
  package func requireOneStandardInput(_ options: [PasscodeOption]) throws {
    let readers = options.filter { value($0.file) == "-" }
    if readers.count > 1 {
      throw usageError(
        "Only one of \(readers.map { "--\($0.file.long)" }.joined(separator: " and ")) can read standard input (-).")
    }
  }
}

/// A passcode given as `--NAME CODE` or `--NAME-file FILE`, or in an environment variable:
/// declared once per meaning and shared by the commands that ask for that passcode.
package struct PasscodeOption: Sendable {
  /// `--NAME CODE`.
  package let code: Option
  /// `--NAME-file FILE`.
  package let file: Option
  /// The environment variable read when neither option is given.
  package let environmentKey: String

  /// `--<name> CODE` and `--<name>-file FILE`; `what` says which passcode it is, and `prompts`
  /// whether the command asks on a terminal when neither is given.
  package init(_ name: String, _ what: String, environmentKey: String, prompts: Bool = true) {
    let fallback = prompts ? "$\(environmentKey), else a prompt" : "$\(environmentKey)"
    code = .value(
      name, "code",
      help: "\(what) (default: \(fallback)); briefly visible to other users: prefer --\(name)-file.")
    file = .value(name + "-file", "file", help: "Like --\(name), from the first line of FILE (- for standard input).")
    self.environmentKey = environmentKey
  }

  /// Both options, for a command's `options`.
  package var options: [Option] { [code, file] }
}

/// Reading a passcode from the terminal without echo.
package enum Terminal {
  package static func readSecret(_ prompt: String) -> String? {
    var saved = termios()
    let hasTerminal = Kernel.tcgetattr(STDIN_FILENO, &saved) == 0
    if hasTerminal {
      var quiet = saved
      quiet.c_lflag &= ~tcflag_t(ECHO)
      Kernel.tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
    }
    // The prompt comes after TCSAFLUSH (as getpass(3) does), so nothing typed after it is dropped.
    FileHandle.standardError.write(Data(prompt.utf8))
    defer {
      if hasTerminal { Kernel.tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) }
      FileHandle.standardError.write(Data("\n".utf8))
    }
    return readLine(strippingNewline: true)
  }
}

/// A transition's result as `lock --json` and `unlock --json` print it: one document.
struct TransitionJSON: Encodable {
  /// The device root.
  var device: String
  /// lock or unlock.
  var operation: String
  /// The lock state after it.
  var state: LockState
  /// iOS's `isProtectedDataAvailable` after it.
  var protectedDataAvailable: Bool
  /// Items looked at.
  var visited: Int
  /// Items whose permission bits were taken away.
  var restricted: Int
  /// Items whose original mode came back.
  var restored: Int
  /// Files left unchanged because they have more than one link.
  var hardLinked: [String]
  /// Items whose saved-mode record protfs had not written (ignored).
  var unauthenticated: [String]
  /// Items left unchanged because their name is not UTF-8 (escaped `\xNN`): always empty now,
  /// such items are locked like any other.
  var notUTF8: [String]
  /// Items whose class attribute holds garbage, locked as class complete.
  var garbageClass: [String]
  /// lock: until when complete (class A) data stays readable (the grace); absent without one.
  var classKeysUntil: Date?
  /// lock: files of unavailable classes that processes still hold open.
  var openFiles: [OpenFile]?
  /// unlock: the finished downloads that waited for it, as it left them.
  var downloads: [TaskOutcome]?

  /// The result of `report` on `device`, in the state `record` is in now.
  init(_ report: TransitionReport, device: Device, record: LockRecord) {
    self.device = device.root
    operation = report.operation
    state = report.to.lockState
    protectedDataAvailable = report.to.isProtectedDataAvailable
    visited = report.visited
    restricted = report.restricted
    restored = report.restored
    hardLinked = report.hardLinked
    unauthenticated = report.unauthenticated
    notUTF8 = report.notUTF8
    garbageClass = report.garbageClass
    classKeysUntil = report.to.classKeysHeld ? record.classKeysUntil : nil
  }
}

/// Words for a transition's result, shared by lock, unlock, reboot and passcode remove.
package enum TransitionText {
  package static func summary(_ report: TransitionReport, device: Device) -> String {
    // Only the wording depends on it: a device whose keybag cannot be read words as unsealed.
    if (try? LockController(device: device).isSealed) == true { return sealedSummary(report, device: device) }
    var parts: [String] = []
    func items(_ count: Int) -> String { count == 1 ? "1 item" : "\(count) items" }
    if report.restricted > 0 { parts.append("\(items(report.restricted)) locked out") }
    if report.restored > 0 { parts.append("\(items(report.restored)) restored") }
    let detail = parts.isEmpty ? "no permission bits changed" : parts.joined(separator: ", ")
    return "\(device.root): \(report.to.lockState) (\(detail); \(items(report.visited)) checked)."
  }

  /// A sealed device's transition: its keys, not its files' modes (docs/sealed.md).
  static func sealedSummary(_ report: TransitionReport, device: Device) -> String {
    // Class B keeps its public key, so that files can still be made while locked.
    let withdrawn = ProtectionClass.byStrength.filter { !report.to.allows($0, .read) }
      .map { $0 == .completeUnlessOpen ? "\($0.name) (its private key)" : $0.name }
    let keys =
      if report.to.isProtectedDataAvailable && report.from != report.to {
        "class keys unwrapped into the kernel keyring"
      } else if withdrawn.isEmpty {
        "every class key held"
      } else {
        "keys of \(withdrawn.joined(separator: ", ")) evicted"
      }
    return "\(device.root): \(report.to.lockState) (sealed: \(keys); no file changed)."
  }

  /// Warns on stderr about the items the transition left alone or whose record it ignored.
  package static func warnings(_ report: TransitionReport) {
    for path in report.garbageClass {
      Console.err(
        "Warning: '\(path)' has a class attribute (user.protfs.class) that holds no protection class; it was treated as class complete, the strictest. Set its class with `protfs set-class`."
      )
    }
    for path in report.hardLinked {
      Console.err(
        "Warning: '\(path)' has more than one link, so it may also be reachable from outside the device; it was left unchanged (not locked). Copy it instead of linking it."
      )
    }
    for path in report.unauthenticated {
      Console.err(
        "Warning: '\(path)' carried a saved-mode record that protfs did not write (forged, copied, or from an older version); it was ignored\(report.to.lockState == .unlocked ? ", and the item got mode 0600 (0700 for a directory): set the mode it should have" : "")."
      )
    }
  }
}
