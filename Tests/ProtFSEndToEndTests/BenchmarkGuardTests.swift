import Foundation
import ProtFSTestSupport
import Testing

/// The benchmarks measure on a quiet machine or say they did not (benchmarks/quiet.py): a busy
/// one is waited for, then refused with status 75, unless BENCH_BUSY=1 asks to measure anyway,
/// which the report then says. Driven with a fake load average and clock, so nothing waits.
@Suite struct BenchmarkGuardTests {
  static let benchmarks = RepositoryLayout.packageRoot + "/benchmarks"

  /// Runs `require_quiet` with the load averages `readings` (one per reading, the last repeated)
  /// and a clock that does not wait; prints the seconds it slept to stderr.
  func guarded(_ readings: [Double], environment: [String: String] = [:]) async throws -> RunResult {
    let driver = """
      import sys
      sys.path.insert(0, \(String(reflecting: Self.benchmarks)))
      import quiet
      readings = \(readings)
      slept = []
      def read():
          return readings.pop(0) if len(readings) > 1 else readings[0]
      try:
          quiet.require_quiet(read=read, sleep=slept.append)
      finally:
          print("slept", sum(slept), file=sys.stderr)
      """
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
