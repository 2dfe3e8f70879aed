import Foundation
import ProtFSTestSupport
import Testing

/// `scripts/demo.sh`, the main command: with this build it tells the source documents' whole story,
/// every step printing the line that proves it, within its two minutes, and leaves no process,
/// mount or directory behind.
@Suite(.timeLimit(.minutes(3))) struct DemoScriptTests {
  @Test func theDemoTellsTheWholeStoryAndLeavesNothingBehind() async throws {
    let root = RepositoryLayout.packageRoot
    let build = URL(fileURLWithPath: Protfs.binary).deletingLastPathComponent().path
    // The demo's temporary directory goes in here, so that what it leaves can be looked for.
    let scratch = try TestDevice.makeTemporaryDirectory(prefix: "protfs-demo-test")
    defer { TestDevice.removeTree(scratch) }
    chmod(scratch, 0o755)  // the app user reaches the demo's device through it
    let result = try await Protfs.runProgram(
      "/bin/bash", [root + "/scripts/demo.sh"], environment: ["PROTFS_BUILD": build, "TMPDIR": scratch])
    #expect(result.status == 0, "\(result)")
    let step = Self.steps(result.stdout)
    // Every command shown is one a shell runs: a background command ends its line ("cmd & ; cmd" is not).
    #expect(!result.stdout.contains("& ;"), "\(result.stdout)")
    // The apps keep their downloads under the names of what they downloaded, not the session's temp files.
    #expect(!result.stdout.contains("Documents/CFNetworkDownload_"), "\(result.stdout)")
    #expect(!result.stdout.contains("Documents\\/CFNetworkDownload_"), "\(result.stdout)")
    let mounted = FileManager.default.fileExists(atPath: "/dev/fuse")

    #expect(step[0].contains("Mounted ") == mounted, "\(step[0])")
    // 1. The expiration handler, the kill and its crash report; the task ended in time, suspended.
    #expect(step[1].contains("expiring, still not ending the task"), "\(step[1])")
    #expect(step[1].contains("exit status 137 (killed by the system)"), "\(step[1])")
    #expect(step[1].contains(#""terminationReason" : "0x8badf00d""#), "\(step[1])")
    #expect(step[1].contains("com.example.app: suspended; pid "), "\(step[1])")
    // 2–3. The download dies once the phone locks; the Downloads directory made class none.
    #expect(step[2].contains("Operation not permitted (the device locked during the download)"), "\(step[2])")
    #expect(step[3].contains("NSFileProtectionNone  own"), "\(step[3])")
    // 4. Woken while suspended, the app moves the file and calls the events' handler.
    for event in ["handleEventsForBackgroundURLSession", "didFinishDownloadingTo", "urlSessionDidFinishEvents"] {
      #expect(step[4].contains(#""event":"\#(event)""#), "\(step[4])")
    }
    #expect(step[4].contains("Documents\\/big.bin"), "\(step[4])")
    // 5. Killed, then relaunched by the service with a pid of its own, and the file in Documents.
    #expect(step[5].contains(#""event":"handleEventsForBackgroundURLSession""#), "\(step[5])")
    let killed = Self.number(after: "(pid ", in: step[5])
    let relaunched = Self.number(after: "com.example.app: suspended; pid ", in: step[5])
    #expect(killed != nil && relaunched != nil && killed != relaunched, "\(step[5])")
    #expect(step[5].contains(" 3145728 "), "\(step[5])")
    // 6. The upload's JSON reply, read by the app.
    #expect(step[6].contains(#""event":"didReceive","json":true"#), "\(step[6])")
    #expect(step[6].contains(#""status":201"#), "\(step[6])")
    // 7. The fetch: its download in Documents, and its result.
    #expect(step[7].contains("last fetch: newData"), "\(step[7])")
    #expect(step[7].contains(#"{"headlines": ["Protected data", "Background time"]}"#), "\(step[7])")
    // 8. Paused with resume data, resumed at an offset, and completed: the whole file.
    #expect(step[8].contains(#""event":"paused","resumeData":"#), "\(step[8])")
    #expect((Self.number(after: #""offset":"#, in: step[8]) ?? 0) > 0, "\(step[8])")
    #expect(step[8].contains(#"{"code":0,"event":"didCompleteWithError""#), "\(step[8])")
    #expect(step[8].contains(" 3145728 "), "\(step[8])")
    // 9. Through the mount, a program refused the file reads EPERM, as on a phone, until unlock.
    if mounted {
      #expect(step[9].contains("notes.txt: Operation not permitted\n(exit status 1)"), "\(step[9])")
      #expect(step[9].contains("notes.txt: Operation not permitted\n(exit status 1: it cannot undo"), "\(step[9])")
      #expect(!result.stdout.contains("Permission denied"), "\(result.stdout)")
    }
    #expect(step[9].contains("secret\n\ndemo: done in "), "\(step[9])")
    #expect((Self.number(after: "demo: done in ", in: step[9]) ?? .max) < 120, "\(step[9])")

    // Nothing is left: no directory, no process started from it or for its device, no mount.
    let left = (try? FileManager.default.contentsOfDirectory(atPath: scratch)) ?? []
    #expect(left.isEmpty, "\(left)")
    let processes = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap(Int32.init)
      .filter { isProcess($0, namedBy: scratch) }
    #expect(processes.isEmpty, "\(processes.map { Self.commandLine($0) })")
    let mounts = currentMountInfo()
    #expect(!mounts.contains(scratch), "\(mounts)")
  }

  /// The demo's output cut at its headings ("## N. …"): element N is step N, heading included.
  static func steps(_ output: String) -> [String] {
    var steps = Array(repeating: "", count: 10)
    var current = -1
    for line in output.split(separator: "\n", omittingEmptySubsequences: false) {
      if line.hasPrefix("## "), let number = Int(line.dropFirst(3).prefix { $0.isNumber }), number < steps.count {
        current = number
      }
      if current >= 0 { steps[current] += line + "\n" }
    }
    return steps
  }

  /// The number written right after the first `prefix` in `text`.
  static func number(after prefix: String, in text: String) -> Int? {
    guard let range = text.range(of: prefix) else { return nil }
    return Int(text[range.upperBound...].prefix { $0.isNumber })
  }

  /// Process `pid`'s command line, for a failure message.
  static func commandLine(_ pid: Int32) -> String {
    let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()
    return "\(pid): " + String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
  }
}
