import Foundation
import ProtFS
import ProtFSMount
import ProtFSSystem

/// `protfs mount MOUNTPOINT`: the device's containers through FUSE, where the class decides.
package enum MountCommand {
  package static let command = Command(
    name: "mount",
    abstract: "Serve the device's containers at MOUNTPOINT, where the lock binds every process.",
    discussion: """
      Mounts the device's Containers/ at MOUNTPOINT through FUSE (libfuse3). Every open, read,
      write, truncation, creation and attribute write through the mount is decided by the class ×
      state table at that moment, per open file, for every process, root included: refusals are
      "Operation not permitted" (EPERM), as on iOS. A complete file opened before a lock fails its
      reads and writes once the lock takes effect; a complete-unless-open one keeps working.
      Listing, stat, rename, unlink and chmod are never refused by the class. Items created
      through the mount get their directory's class and belong to their creator. Lock, unlock and
      reboot apply at once. Returns once the mount answers (the daemon stays in the background);
      `protfs unmount MOUNTPOINT` ends it. Needs root and /dev/fuse.
      """,
    arguments: [mountpoint],
    options: [foreground],
    run: run
  )

  /// `<mountpoint>`.
  package static let mountpoint = Argument(name: "mountpoint", help: "An existing directory outside the device.")
  /// `--foreground`.
  package static let foreground = Option.flag(
    "foreground", short: "f", help: "Stay attached: serve until unmounted or interrupted (Ctrl-C unmounts).")

  /// Set in the environment of the daemon a background mount starts: it reports readiness on
  /// standard output, then detaches.
  static let notifyKey = "PROTFS_MOUNT_NOTIFY"

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try MountDaemon.checkAvailable()
    try device.requireInitialized()
    let mountpoint = MountDaemon.mountpoint(invocation.required(Self.mountpoint))
    try MountDaemon.checkMountpoint(mountpoint, device: device)
    if invocation.environment[Self.notifyKey] == "1" {
      return try serveDetached(device, mountpoint)
    }
    if invocation.flag(Self.foreground) {
      try MountDaemon.serve(device: device, at: mountpoint) {
        let unmount = invocation.spelling.command("unmount \(CommandSpelling.shellWord(mountpoint))")
        Console.err("Serving \(device.root)/Containers at \(mountpoint); Ctrl-C or \(unmount) ends it.")
      }
      return 0
    }
    return try startDaemon(invocation, device, mountpoint)
  }

  /// The daemon side of a background mount: a session of its own, "ready" on standard output once
  /// the mount answers, then standard output and error go to /dev/null.
  private static func serveDetached(_ device: Device, _ mountpoint: String) throws -> Int32 {
    _ = Kernel.setsid()
    _ = Kernel.chdir("/")
    try MountDaemon.serve(device: device, at: mountpoint) {
      let line = "ready \(Kernel.getpid())\n"
      _ = line.withCString { text in Kernel.write(1, text, strlen(text)) }
      if case .success(let null) = Kernel.open("/dev/null", O_RDWR) {
        _ = Kernel.dup2(null, 1)
        _ = Kernel.dup2(null, 2)
        closeDescriptor(null)
      }
    }
    return 0
  }

  /// Starts `protfs mount --foreground` as a daemon and waits until it reports the mount answers.
  private static func startDaemon(_ invocation: Invocation, _ device: Device, _ mountpoint: String) throws -> Int32 {
    let output = Pipe()
    let errors = Pipe()
    let daemon = try launchDaemon(invocation, device, mountpoint, output: output, errors: errors)
    // Only the daemon holds the writing ends now: its exit ends both streams.
    try? output.fileHandleForWriting.close()
    try? errors.fileHandleForWriting.close()
    var received = Data()
    while !received.contains(UInt8(ascii: "\n")) {
      let chunk = output.fileHandleForReading.availableData
      if chunk.isEmpty { break }
      received += chunk
    }
    let line = String(decoding: received, as: UTF8.self)
    guard line.hasPrefix("ready ") else {
      let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
      let status = (try? Kernel.waitForChild(daemon).get()) ?? 1
      FileHandle.standardError.write(Data(message.utf8))
      return status == 0 ? 1 : status
    }
    let pid = line.dropFirst(6).prefix { $0.isNumber }
    Console.out("Mounted \(device.root)/Containers at \(mountpoint) (daemon pid \(pid)).")
    return 0
  }

  /// Starts this program as the mount daemon of `device` at `mountpoint`, standard input from
  /// /dev/null, standard output and error into `output` and `errors`. Returns its pid.
  private static func launchDaemon(
    _ invocation: Invocation, _ device: Device, _ mountpoint: String, output: Pipe, errors: Pipe
  ) throws -> pid_t {
    let executable =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var environment = invocation.environment
    environment[Self.notifyKey] = "1"
    return try MountDaemon.startProcess(
      executable, arguments: [executable, "--device", device.root, "mount", mountpoint], environment: environment,
      output: output.fileHandleForWriting.fileDescriptor, errors: errors.fileHandleForWriting.fileDescriptor)
  }
}
