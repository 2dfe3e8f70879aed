import Foundation
import ProtFSSystem

/// What a run of a program (the `protfs` binary, most often) printed and returned.
public struct RunResult: Sendable, CustomStringConvertible {
  /// Exit status (or 128 + signal).
  public var status: Int32
  /// Everything written to standard output, as bytes (a report is checked as the bytes it is).
  public var stdoutBytes: Data
  /// Everything written to standard error.
  public var stderr: String

  /// Everything written to standard output, as text.
  public var stdout: String { String(decoding: stdoutBytes, as: UTF8.self) }

  /// Standard output without its final newline.
  public var output: String { stdout.hasSuffix("\n") ? String(stdout.dropLast()) : stdout }

  /// A summary for failure messages.
  public var description: String { "status \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
}

/// Runs the built `protfs` binary, as a user would.
public enum Protfs {
  /// The path of the built binary: `$PROTFS_BINARY`, else next to the test bundle.
  public static let binary: String = {
    if let explicit = ProcessInfo.processInfo.environment["PROTFS_BINARY"], !explicit.isEmpty { return explicit }
    var candidates: [String] = []
    if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
      var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
      // The test bundle may be a directory (…/protfsPackageTests.xctest/…); walk up to the build directory.
      for _ in 0..<4 {
        candidates.append(dir.appendingPathComponent("protfs").path)
        dir = dir.deletingLastPathComponent()
      }
    }
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    candidates.append(packageRoot.appendingPathComponent(".build/debug/protfs").path)
    for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) {
      var isDirectory: ObjCBool = false
      if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue {
        return candidate
      }
    }
    fatalError("The protfs binary was not found (looked in \(candidates)); run `swift build` or set PROTFS_BINARY.")
  }()

  /// Runs `protfs ARGS` with `environment` added to a clean environment, and waits for it on a
  /// thread of its own (`offPool`), so that other tests run meanwhile.
  @discardableResult
  public static func run(
    _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
    currentDirectory: String? = nil
  ) async throws -> RunResult {
    try await runProgram(binary, arguments, environment: environment, stdin: stdin, currentDirectory: currentDirectory)
  }

  /// As `run`, waiting on the calling thread: only where `await` cannot go (a `defer`, a body
  /// already run by `offPool`).
  @discardableResult
  public static func runBlocking(
    _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
    currentDirectory: String? = nil
  ) throws -> RunResult {
    try runProgramBlocking(
      binary, arguments, environment: environment, stdin: stdin, currentDirectory: currentDirectory)
  }

  /// Starts `protfs ARGS`, a download with `--progress json`, in the background and returns it once
  /// it reported `bytes` written for a task; nil when it ended before that. Standard error goes to
  /// `standardError` when given, else it is dropped.
  public static func startDownload(_ arguments: [String], untilWritten bytes: Int, standardError: FileHandle? = nil)
    async throws -> TestProcess?
  {
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = arguments
    process.environment = testEnvironment(adding: [:])
    let output = Pipe()
    process.standardOutput = output
    process.standardError = standardError ?? FileHandle.nullDevice
    try process.start()
    let reader = output.fileHandleForReading
    let progress = "\"written\":\(bytes)"
    let reported = await offPool { String(decoding: reader.read(until: progress), as: UTF8.self).contains(progress) }
    return reported ? process : nil
  }

  /// This process's environment with `extra` added, and without what would lead a test to the
  /// user's real device.
  private static func testEnvironment(adding extra: [String: String]) -> [String: String] {
    var env = ProcessInfo.processInfo.environment
    env["PROTFS_DEVICE"] = nil
    env["XDG_DATA_HOME"] = nil
    for (key, value) in extra { env[key] = value }
    return env
  }

  /// Runs any program with captured output (through files, so that a large report cannot fill a
  /// pipe and block), waiting for it off the pool.
  @discardableResult
  public static func runProgram(
    _ program: String, _ arguments: [String], environment: [String: String] = [:],
    stdin: String? = nil, currentDirectory: String? = nil
  ) async throws -> RunResult {
    try await offPool {
      try runProgramBlocking(
        program, arguments, environment: environment, stdin: stdin, currentDirectory: currentDirectory)
    }
  }

  /// As `runProgram`, waiting on the calling thread: only where `await` cannot go.
  @discardableResult
  public static func runProgramBlocking(
    _ program: String, _ arguments: [String], environment: [String: String] = [:],
    stdin: String? = nil, currentDirectory: String? = nil
  ) throws -> RunResult {
    let scratch = try TestDevice.makeTemporaryDirectory(prefix: "protfs-run")
    defer { TestDevice.removeTree(scratch) }
    let (inPath, outPath, errPath) = (scratch + "/stdin", scratch + "/stdout", scratch + "/stderr")
    // Standard input is a file holding `stdin` (or /dev/null): nothing to feed, nothing to block on.
    if let stdin { _ = FileManager.default.createFile(atPath: inPath, contents: Data(stdin.utf8)) }
    let input = open(stdin == nil ? "/dev/null" : inPath, O_RDONLY | O_CLOEXEC)
    let output = open(outPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    let error = open(errPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    defer { for fd in [input, output, error] where fd >= 0 { close(fd) } }
    guard input >= 0, output >= 0, error >= 0 else {
      throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: scratch])
    }
    var launch = PlainLaunch(
      path: program, arguments: [program] + arguments,
      environment: testEnvironment(adding: environment).map { "\($0.key)=\($0.value)" })
    (launch.input, launch.output, launch.error) = (input, output, error)
    launch.directory = currentDirectory
    let pid: pid_t
    switch launch.start() {
    case .success(let started): pid = started
    case .failure(let failure):
      throw CocoaError(
        .fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: program, NSUnderlyingErrorKey: failure as NSError])
    }
    let status = try Kernel.waitForChild(pid).get()
    return RunResult(
      status: status,
      stdoutBytes: FileManager.default.contents(atPath: outPath) ?? Data(),
      stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
  }
}

extension FileHandle {
  /// Reads (blocking: call it from `offPool`) until what was read contains `text` or the stream
  /// ends; returns all that was read.
  public func read(until text: String) -> Data {
    var read = Data()
    while !String(decoding: read, as: UTF8.self).contains(text) {
      let chunk = availableData
      if chunk.isEmpty { break }
      read += chunk
    }
    return read
  }
}

/// Whether process `pid` is still one of a test's: its command line or its environment names
/// `marker` (the test device's root, which every protfs command run on that device, and every app
/// it launches, carries).
public func isProcess(_ pid: pid_t, namedBy marker: String) -> Bool {
  guard pid > 0 else { return false }
  return ["cmdline", "environ"].contains { file in
    FileManager.default.contents(atPath: "/proc/\(pid)/\(file)").map {
      String(decoding: $0, as: UTF8.self).contains(marker)
    } ?? false
  }
}

/// Kills `pid` (with `group`, its process group) if it is still one of a test's
/// (`isProcess(_:namedBy:)`). A pid that a record kept may belong to another test's process by
/// the time a cleanup reads it: pids wrap at 32,768 on this machine, and the suite starts thousands.
public func killIfStill(_ pid: pid_t, namedBy marker: String, group: Bool = false) {
  guard isProcess(pid, namedBy: marker) else { return }
  kill(group ? -pid : pid, SIGKILL)
}
