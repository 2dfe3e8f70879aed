import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs unlock` asking for the passcode on a terminal (a pty from util-linux `script`).
@Suite(.timeLimit(.minutes(1))) struct PasscodePromptTests {
  /// Runs `protfs ARGS` on a pty, types `typed` once the prompt shows, and returns status and
  /// screen; the waits are off the pool.
  func runOnTerminal(_ arguments: [String], typing typed: String) async throws -> (Int32, String) {
    try await runOnTerminal(arguments, answering: [("Passcode: ", typed)])
  }

  /// Runs `protfs ARGS` on a pty and answers each prompt, in order, once it shows.
  func runOnTerminal(_ arguments: [String], answering answers: [(String, String)]) async throws -> (Int32, String) {
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
    process.arguments = ["-qec", ([Protfs.binary] + arguments).joined(separator: " "), "/dev/null"]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    try process.start()
    let reader = output.fileHandleForReading
    let writer = input.fileHandleForWriting
    let screen = await offPool { () -> Data in
      // The prompt turns echo off with TCSAFLUSH, which drops what was typed before it: wait for it.
      var screen = Data()
      for (prompt, typed) in answers {
        screen += reader.read(until: prompt)
        writer.write(Data((typed + "\n").utf8))
      }
      screen += reader.readDataToEndOfFile()
      process.waitUntilExit()
      return screen
    }
    return (process.terminationStatus, String(decoding: screen, as: UTF8.self))
  }

  @Test func unlockPromptsWithoutEchoAndChecksThePasscode() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    #expect(try await Protfs.run(["--device", t.root, "passcode", "set", "--passcode", "4321"]).status == 0)
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let (wrongStatus, wrongScreen) = try await runOnTerminal(["--device", t.root, "unlock"], typing: "1111")
    #expect(wrongStatus == 1 && !wrongScreen.contains("1111"), "\(wrongScreen)")
    #expect(t.device.isProtectedDataAvailable == false)
    let (status, screen) = try await runOnTerminal(["--device", t.root, "unlock"], typing: "4321")
    #expect(status == 0, "\(screen)")
    #expect(screen.contains("Passcode: ") && !screen.contains("4321"))
    #expect(t.device.isProtectedDataAvailable)
  }

  /// Typed at the prompt, a new passcode is asked for twice, as passwd(1) does; two that differ
  /// change nothing (issue 64).
  @Test func passcodeSetAsksTwiceOnATerminal() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let (differ, differScreen) = try await runOnTerminal(
      ["--device", t.root, "passcode", "set"],
      answering: [("New passcode: ", "1111"), ("Retype new passcode: ", "2222")])
    #expect(differ == 1 && differScreen.contains("do not match"), "\(differScreen)")
    #expect(
      try await Protfs.run(["--device", t.root, "status", "--json"]).stdout.contains(#""passcodeRequired" : false"#))
    let (same, sameScreen) = try await runOnTerminal(
      ["--device", t.root, "passcode", "set"],
      answering: [("New passcode: ", "1111"), ("Retype new passcode: ", "1111")])
    #expect(same == 0 && !sameScreen.contains("1111"), "\(sameScreen)")
    #expect(
      try await Protfs.run(["--device", t.root, "status", "--json"]).stdout.contains(#""passcodeRequired" : true"#))
  }
}
