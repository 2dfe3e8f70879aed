import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem

/// `protfs __end-grace`: the hidden process a graceful `lock` leaves behind, which withdraws the
/// class A keys when the lock's grace ends (docs/semantics.md §3). Should it be killed, the next
/// protfs command run as root does it.
package enum EndGraceCommand {
  package static let command = Command(
    name: "__end-grace",
    abstract: "Wait for the lock's grace to end, then withdraw the class A keys (used by lock).",
    isHidden: true,
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    // Read again after each wait: an unlock may have ended the grace, or a new lock begun another.
    while true {
      let record = try controller.record()
      guard record.state == .locked, let until = record.classKeysUntil else { return 0 }
      let wait = until.timeIntervalSinceNow
      if wait > 0 {
        Thread.sleep(forTimeInterval: wait)
        continue
      }
      _ = try controller.endGraceIfDue()
    }
  }

  /// Starts the process for `device`, detached (a session of its own, standard streams on
  /// /dev/null, no other descriptor), and returns at once.
  static func start(device: Device) throws {
    let arguments = ["protfs", "--device", device.root, command.name]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for fd in Int32(0)...2 {
      posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
    }
    _ = Kernel.spawnClosing(from: 3, &actions)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setflags(&attributes, Kernel.spawnNewSession | Int16(POSIX_SPAWN_SETSIGMASK))
    var pid: pid_t = 0
    let status = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, &argv, environ)
    guard status == 0 else {
      throw ProtFSError.system("start the process that ends the lock's grace for", path: device.root, errno: status)
    }
  }
}
