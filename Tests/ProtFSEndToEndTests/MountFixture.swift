import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// A fresh device with one container, mounted with the built `protfs mount` at a directory beside
/// it. The mount is always undone when the value goes away, also when a test fails half-way: a
/// lazy unmount and a kill of the daemon, should `protfs unmount` not manage.
final class MountedDevice {
  let t: TestDevice
  /// The mountpoint: `<tmp>/mnt`, showing the device's `Containers/`.
  let mountpoint: String
  static let bundle = "com.example.app"

  /// Creates the device (with `setup` run before mounting) and mounts it.
  /// Creates the device (in `directory`, or a new temporary one; with `setup` run before
  /// mounting) and mounts it.
  init(in directory: String? = nil, setup: (TestDevice) throws -> Void = { _ in }) async throws {
    t =
      try directory.map { try TestDevice(directory: $0, containers: [Self.bundle]) }
      ?? TestDevice(containers: [Self.bundle])
    chmod(t.directory, 0o755)  // other users must reach the mountpoint
    mountpoint = t.directory + "/mnt"
    mkdir(mountpoint, 0o755)
    try setup(t)
    let result = try await protfs(["mount", mountpoint])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout.contains("Mounted"), "\(result)")
  }

  deinit {
    if MountRegistry.protfsMountpoints().contains(mountpoint) {
      _ = try? Protfs.runBlocking(["--device", t.root, "unmount", mountpoint])
    }
    if MountRegistry.protfsMountpoints().contains(mountpoint) { umount2(mountpoint, 2 /* MNT_DETACH */) }
    for record in MountRegistry(device: t.device).records() { killIfStill(record.pid, namedBy: t.root) }
  }

  var root: String { t.root }

  /// Whether process `pid` runs (exists and is not a zombie waiting for a parent to reap it).
  static func isRunning(_ pid: Int32) -> Bool {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = text.lastIndex(of: ")")
    else { return false }
    return !text[close...].hasPrefix(") Z")
  }
  /// The container as the mount shows it.
  var container: String { mountpoint + "/" + Self.bundle }
  /// `Documents/` as the mount shows it.
  var documents: String { container + "/Documents" }
  /// `Documents/` in the backing tree.
  var backingDocuments: String { t.containerPath(Self.bundle, "Documents") }

  @discardableResult
  func protfs(_ arguments: [String]) async throws -> RunResult {
    try await Protfs.run(["--device", t.root] + arguments)
  }

  /// Runs `script` with `/bin/sh -c`, as root or, with `user`, as that uid and gid.
  func sh(_ script: String, as user: UInt32? = nil) async throws -> RunResult {
    guard let user else { return try await Protfs.runProgram("/bin/sh", ["-c", script]) }
    return try await Protfs.runProgram(
      "/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", "/bin/sh", "-c", script])
  }

  /// Writes a backing file with `contents` and class `cls` (before mounting, or behind the mount).
  static func file(_ t: TestDevice, _ relative: String, _ cls: ProtectionClass?, _ contents: String = "data\n")
    throws
  {
    let path = t.containerPath(bundle, relative)
    try t.writeFile(path, contents)
    if let cls { try t.device.setClass(cls, of: try t.device.resolve(path)) }
  }

  /// Makes a backing directory of class `cls`, owned by the app user as `protfs init` makes them.
  static func directory(_ t: TestDevice, _ relative: String, _ cls: ProtectionClass) throws {
    let path = t.containerPath(bundle, relative)
    mkdir(path, 0o755)
    chown(path, 501, 501)
    try t.device.setClass(cls, of: try t.device.resolve(path))
  }
}

/// A program that keeps running while the test talks to it, one line at a time (no sleeps: each
/// answer is awaited, off the pool).
///
/// `@unchecked Sendable`: one test talks to it, one line at a time; `buffered` is touched only by
/// the read in flight.
final class Conversation: @unchecked Sendable {
  let process = TestProcess()
  private let input = Pipe()
  private let output = Pipe()
  private var buffered = Data()

  /// Starts `program ARGS`.
  init(_ program: String, _ arguments: [String]) throws {
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    process.standardInput = input
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.start()
  }

  /// The next line the program prints; "" when it ended.
  func line() async -> String {
    await offPool { self.readLine() }
  }

  private func readLine() -> String {
    while !buffered.contains(UInt8(ascii: "\n")) {
      let chunk = output.fileHandleForReading.availableData
      if chunk.isEmpty { break }
      buffered += chunk
    }
    guard let end = buffered.firstIndex(of: UInt8(ascii: "\n")) else { return "" }
    let text = String(decoding: buffered[buffered.startIndex..<end], as: UTF8.self)
    buffered = Data(buffered[(end + 1)...])
    return text
  }

  /// Sends `command` and returns the answer.
  func ask(_ command: String) async -> String {
    input.fileHandleForWriting.write(Data((command + "\n").utf8))
    return await line()
  }

  deinit {
    try? input.fileHandleForWriting.close()
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
  }

  /// A python3 process holding `path` open (`os.open` with `flags`, e.g. `os.O_RDWR`) that answers
  /// `read`, `write` (appends a line), `write-at OFFSET` (a line there), `sync` and `close` with `ok …` or
  /// `err ERRNO`; its first line is `opened` or `err ERRNO`.
  static func holding(_ path: String, flags: String = "os.O_RDWR", user: UInt32? = nil) throws -> Conversation {
    let script = """
      import os, sys
      try:
          fd = os.open(sys.argv[1], \(flags), 0o644)
          print("opened", flush=True)
      except OSError as e:
          print("err", e.errno, flush=True)
          sys.exit(0)
      for command in sys.stdin:
          command = command.strip()
          try:
              if command == "read":
                  os.lseek(fd, 0, 0)
                  print("ok", os.read(fd, 4096).decode().strip().replace("\\n", "|"), flush=True)
              elif command == "write":
                  os.lseek(fd, 0, 2)
                  os.write(fd, b"more\\n")
                  print("ok", flush=True)
              elif command.startswith("write-at "):
                  os.pwrite(fd, b"far\\n", int(command.split()[1]))
                  print("ok", flush=True)
              elif command == "sync":
                  os.fsync(fd)
                  print("ok", flush=True)
              elif command == "close":
                  os.close(fd)
                  print("ok", flush=True)
          except OSError as e:
              print("err", e.errno, flush=True)
      """
    if let user {
      return try Conversation(
        "/usr/bin/setpriv",
        ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", "/usr/bin/python3", "-c", script, path])
    }
    return try Conversation("/usr/bin/python3", ["-c", script, path])
  }
}
