import Foundation
import ProtFSTestSupport
import Testing

/// The benchmarks measure on a quiet machine or say they did not (benchmarks/quiet.py): a busy
/// one is waited for, then refused with status 75, unless BENCH_BUSY=1 asks to measure anyway,
/// which the report then says. Driven with a fake load average and clock, so nothing waits.
@Suite struct BenchmarkGuardTests {
  static let benchmarks = RepositoryLayout.packageRoot + "/benchmarks"

  /// Runs `require_quiet` with the load averages `readings` (one per reading, the last repeated)
  /// and a clock that does not wait, at the time `now`; prints the seconds it slept to stderr.
  /// With `deletedAt`, a benchmark's clean-up noted a deletion then (else none is noted).
  func guarded(
    _ readings: [Double], environment: [String: String] = [:], now: Double = 1_000_000, deletedAt: Double? = nil
  ) async throws -> RunResult {
    let scratch = try TestDevice.makeTemporaryDirectory(prefix: "protfs-bench-guard")
    defer { TestDevice.removeTree(scratch) }
    let marker = scratch + "/deletions"
    if let deletedAt { try "\(Int(deletedAt))\n".write(toFile: marker, atomically: true, encoding: .utf8) }
    let driver = """
      import sys
      sys.path.insert(0, \(String(reflecting: Self.benchmarks)))
      import quiet
      readings = \(readings)
      slept = []
      def read():
          return readings.pop(0) if len(readings) > 1 else readings[0]
      try:
          quiet.require_quiet(read=read, sleep=slept.append, now=lambda: \(now))
      finally:
          print("slept", sum(slept), file=sys.stderr)
      """
    var environment = environment
    environment["BENCH_DELETIONS"] = marker
    return try await Protfs.runProgram("/usr/bin/python3", ["-c", driver], environment: environment)
  }

  @Test func aQuietMachineIsMeasuredAndTheReportSaysItsLoad() async throws {
    let result = try await guarded([0.2])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout == "load average 0.20 (quiet: at most 0.5)\n", "\(result)")
    #expect(result.stderr.contains("slept 0"), "\(result)")
  }

  @Test func aBusyMachineIsWaitedForUntilItSettles() async throws {
    let result = try await guarded([2.0, 1.5, 0.9, 0.4], environment: ["BENCH_SETTLE": "60"])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout == "load average 0.40 (quiet: at most 0.5, after 15 s)\n", "\(result)")
    #expect(result.stderr.contains("Waiting up to 60 s for the load average (2.00) to fall to 0.5"), "\(result)")
  }

  @Test func aMachineThatStaysBusyIsRefusedSayingHowToMeasureAnyway() async throws {
    let result = try await guarded([1.8], environment: ["BENCH_SETTLE": "12"])
    #expect(result.status == 75, "\(result)")
    #expect(result.stdout.isEmpty, "\(result)")
    #expect(result.stderr.contains("the machine is busy: its load average over the last minute is 1.80"), "\(result)")
    #expect(result.stderr.contains("after waiting 12 s") && result.stderr.contains("BENCH_BUSY=1"), "\(result)")
  }

  @Test func measuringABusyMachineAnywaySaysSoInTheReport() async throws {
    let result = try await guarded([3.0], environment: ["BENCH_BUSY": "1"])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout.contains("load average 3.00: a BUSY machine"), "\(result)")
    #expect(result.stdout.contains("not an idle machine's"), "\(result)")
    let limited = try await guarded([0.8], environment: ["BENCH_MAX_LOAD": "1"])
    #expect(limited.status == 0 && limited.stdout.contains("quiet: at most 1"), "\(limited)")
  }

  /// ext4 without a journal slows file creation for 60 s after many deletions: a benchmark that
  /// starts within 65 s of another's clean-up waits out the rest first, and says why.
  @Test func aTreeDeletedMomentsAgoIsWaitedOutBeforeMeasuring() async throws {
    let recent = try await guarded([0.2], now: 1_000_010, deletedAt: 1_000_000)
    #expect(recent.status == 0, "\(recent)")
    #expect(recent.stdout == "load average 0.20 (quiet: at most 0.5)\n", "\(recent)")
    #expect(recent.stderr.contains("Waiting 55 s: a benchmark deleted many files 10 s ago"), "\(recent)")
    #expect(recent.stderr.contains("slept 55"), "\(recent)")

    let old = try await guarded([0.2], now: 1_000_100, deletedAt: 1_000_000)
    #expect(old.status == 0 && old.stderr.contains("slept 0") && !old.stderr.contains("Waiting"), "\(old)")

    let anyway = try await guarded([0.2], environment: ["BENCH_BUSY": "1"], now: 1_000_010, deletedAt: 1_000_000)
    #expect(anyway.status == 0 && anyway.stderr.contains("slept 0"), "\(anyway)")
    #expect(anyway.stderr.contains("measured anyway because BENCH_BUSY=1"), "\(anyway)")
  }

  /// The scripts' clean-up (lib.sh's forget_tree) deletes the tree, even one a lock left without
  /// permissions, and notes when, in the file quiet.py reads.
  @Test func aBenchmarksCleanUpNotesWhenItDeletedItsTree() async throws {
    let scratch = try TestDevice.makeTemporaryDirectory(prefix: "protfs-bench-forget")
    defer { TestDevice.removeTree(scratch) }
    let tree = scratch + "/work"
    try FileManager.default.createDirectory(atPath: tree + "/d", withIntermediateDirectories: true)
    FileManager.default.createFile(atPath: tree + "/d/f", contents: Data("x".utf8))
    chmod(tree + "/d", 0o500)
    let before = Int(Date().timeIntervalSince1970)
    let result = try await Protfs.runProgram(
      "/bin/bash", ["-c", ". \(Self.benchmarks)/lib.sh && forget_tree \"$0\"", tree],
      environment: ["BENCH_DELETIONS": scratch + "/deletions"])
    #expect(result.status == 0, "\(result)")
    #expect(!FileManager.default.fileExists(atPath: tree), "\(result)")
    let noted = try String(contentsOfFile: scratch + "/deletions", encoding: .utf8)
    let seconds = Int(noted.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    #expect(seconds >= before && seconds <= Int(Date().timeIntervalSince1970) + 1, "\(noted)")
  }

  /// Every script that measures checks first: a new one cannot forget.
  @Test func everyBenchmarkScriptChecksTheMachineBeforeItMeasures() throws {
    let helpers: Set<String> = ["lib.sh", "service-run.sh", "sessions.sh"]  // sessions.sh runs download.sh
    let scripts = try FileManager.default.contentsOfDirectory(atPath: Self.benchmarks)
      .filter { $0.hasSuffix(".sh") && !helpers.contains($0) }
    #expect(scripts.count >= 7, "\(scripts)")
    for script in scripts {
      let text = try String(contentsOfFile: Self.benchmarks + "/" + script, encoding: .utf8)
      #expect(text.contains("\nquiet_machine\n"), "benchmarks/\(script) measures without quiet_machine")
    }
    let launch = try String(
      contentsOfFile: RepositoryLayout.packageRoot + "/scripts/bench-app-launch.py", encoding: .utf8)
    #expect(launch.contains("require_quiet()"))
    let compare = try String(contentsOfFile: Self.benchmarks + "/compare.py", encoding: .utf8)
    #expect(compare.contains("require_quiet()"))
  }
}
