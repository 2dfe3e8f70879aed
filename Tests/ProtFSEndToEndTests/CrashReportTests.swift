import Foundation
import ProtFSTestSupport
import Testing

/// A crash report for every crash, as iOS writes one (docs/apps.md): Examples/CrashingApp crashes
/// each way an app crashes, and its report names the exception type, iOS's termination reason and
/// the thread that crashed; a shell app gets one with its signal; a kill gets none.
@Suite(.timeLimit(.minutes(3))) struct CrashReportTests {
  /// The signal Swift's traps (fatalError, a nil force-unwrapped) raise here: `ud2` on x86-64,
  /// `brk` on arm64 (iOS's).
  #if arch(x86_64)
    static let swiftTrap = SIGILL
  #else
    static let swiftTrap = SIGTRAP
  #endif

  /// What a report holds: its fields, and nothing else.
  static let fields: Set<String> = [
    "bundleID", "time", "terminationReason", "reason", "openTasks", "pid", "crashedThread", "crashedThreadName",
  ]

  /// Runs Examples/CrashingApp crashing `how`; returns its exit status, output and crash reports.
  static func crash(_ how: String) async throws -> (status: Int32, output: [String], reports: [[String: Any]]) {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch([], [try d.installExample("CrashingApp"), how])
    defer { app.stop() }
    let (status, _) = await app.exit()
    return (status, app.output, d.crashReports())
  }

  @Test(arguments: [
    ("fatal", swiftTrap), ("unwrap", swiftTrap), ("abort", SIGABRT), ("segv", SIGSEGV), ("bus", SIGBUS),
    ("fpe", SIGFPE),
  ])
  func aCrashOnTheMainThreadIsReportedWithItsExceptionTypeAndThread(how: String, signal: Int32) async throws {
    let (status, output, reports) = try await Self.crash(how)
    #expect(status == 128 + signal, "\(output)")
    #expect(output.contains("crashing: \(how)") && !output.contains("not reached"), "\(output)")
    #expect(reports.count == 1, "\(reports)")
    let report = try #require(reports.first)
    let types = [
      SIGILL: "EXC_BAD_INSTRUCTION (SIGILL)", SIGTRAP: "EXC_BREAKPOINT (SIGTRAP)", SIGABRT: "EXC_CRASH (SIGABRT)",
      SIGSEGV: "EXC_BAD_ACCESS (SIGSEGV)", SIGBUS: "EXC_BAD_ACCESS (SIGBUS)", SIGFPE: "EXC_ARITHMETIC (SIGFPE)",
    ]
    #expect(report["terminationReason"] as? String == types[signal], "\(report)")
    #expect((report["reason"] as? String)?.hasPrefix("Namespace SIGNAL, Code \(signal), ") == true, "\(report)")
    #expect(report["crashedThread"] as? Int == 0, "\(report)")
    #expect(report["crashedThreadName"] as? String == "com.apple.main-thread", "\(report)")
    #expect(report["bundleID"] as? String == AppDevice.bundle)
    #expect(Set(report.keys) == Self.fields, "\(report)")
  }

  /// An exception nothing catches: SIGABRT, the exception's line as the reason, the main thread.
  @Test func anUncaughtExceptionIsReportedWithTheThreadThatRaisedIt() async throws {
    let (status, output, reports) = try await Self.crash("exception")
    #expect(status == 128 + SIGABRT, "\(output)")
    let report = try #require(reports.first, "\(output)")
    #expect(report["terminationReason"] as? String == "EXC_CRASH (SIGABRT)")
    #expect(
      report["reason"] as? String
        == "*** Terminating app due to uncaught exception 'NSGenericException', reason: "
        + "'Task created in a session that has been invalidated'", "\(report)")
    #expect(report["crashedThread"] as? Int == 0 && report["crashedThreadName"] as? String == "com.apple.main-thread")
  }

  /// A crash on a background thread names that thread: a number past the main thread's, and the
  /// name the app gave it.
  @Test func aCrashOnABackgroundThreadNamesIt() async throws {
    let (status, output, reports) = try await Self.crash("thread")
    #expect(status == 128 + SIGSEGV, "\(output)")
    let report = try #require(reports.first, "\(output)")
    #expect(report["terminationReason"] as? String == "EXC_BAD_ACCESS (SIGSEGV)")
    #expect((report["crashedThread"] as? Int ?? 0) >= 1, "\(report)")
    #expect(report["crashedThreadName"] as? String == "downloader", "\(report)")
  }

  /// Crash records the app forges are claims: one naming a thread out of range is dropped, a hostile
  /// name stays escaped inside its own field, and the exception type is what the app died of.
  @Test func aForgedCrashRecordPutsNothingOutsideTheReportsFields() async throws {
    let (status, output, reports) = try await Self.crash("forged-name")
    #expect(status == 128 + SIGSEGV, "\(output)")
    #expect(output.contains { $0.hasPrefix("forged ") && !$0.hasPrefix("forged -1") }, "\(output)")
    let report = try #require(reports.first, "\(output)")
    #expect(Set(report.keys) == Self.fields, "\(report)")
    #expect(report["terminationReason"] as? String == "EXC_BAD_ACCESS (SIGSEGV)", "\(report)")
    #expect(report["crashedThread"] as? Int == 7, "\(report)")
    #expect(
      report["crashedThreadName"] as? String == #"\x1b]0;owned\x07","terminationReason":"0x8badf00d"#, "\(report)")

    let (farStatus, farOutput, farReports) = try await Self.crash("forged-far")
    #expect(farStatus == 128 + SIGSEGV, "\(farOutput)")
    let far = try #require(farReports.first, "\(farOutput)")
    #expect(far["terminationReason"] as? String == "EXC_BAD_ACCESS (SIGSEGV)", "\(far)")
    #expect(far["crashedThread"] == nil && far["crashedThreadName"] == nil, "\(far)")
  }

  /// A shell app that crashes gets a report with its signal (it has no crash handler to name a
  /// thread); one that exits with a crash's status, or is killed, gets none.
  @Test func aShellAppsCrashIsReportedAndItsExitOrKillIsNot() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // (A breakpoint's SIGTRAP too: on x86-64 Swift's own traps are SIGILL, and the Swift runtime's
    // backtracer lets a program go on past a SIGTRAP it raises.)
    for (name, body, status) in [
      ("crash.sh", "kill -SEGV $$", 128 + SIGSEGV), ("trap.sh", "kill -TRAP $$", 128 + SIGTRAP),
      ("exit.sh", "exit 139", 139), ("kill.sh", "kill -KILL $$", 137), ("term.sh", "kill -TERM $$", 143),
    ] {
      let script = try d.script(name, "#!/bin/sh\necho started\n\(body)\n")
      let app = try d.launch([], [script])
      defer { app.stop() }
      #expect(await app.exit().0 == status, "\(name): \(app.output)")
    }
    let reports = d.crashReports().sorted { ($0["reason"] as? String ?? "") > ($1["reason"] as? String ?? "") }
    #expect(reports.count == 2, "\(reports)")
    #expect(
      reports.map { $0["terminationReason"] as? String } == ["EXC_BREAKPOINT (SIGTRAP)", "EXC_BAD_ACCESS (SIGSEGV)"])
    #expect(
      reports.map { $0["reason"] as? String } == [
        "Namespace SIGNAL, Code 5, Trace/BPT trap: 5", "Namespace SIGNAL, Code 11, Segmentation fault: 11",
      ], "\(reports)")
    #expect(reports.allSatisfy { $0["crashedThread"] == nil }, "\(reports)")
  }
}
