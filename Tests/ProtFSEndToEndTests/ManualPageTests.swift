import Foundation
import ProtFSTestSupport
import Testing

/// The manual pages `protfs help --man` makes and `scripts/man.sh` writes: one per command, each
/// rendered by man(1) and groff without a warning.
@Suite struct ManualPageTests {
  @Test func everyCommandHasAPageThatManRendersWithoutAWarning() async throws {
    let t = try TestDevice(containers: [])
    let root = RepositoryLayout.packageRoot
    let out = t.directory + "/man"
    let written = try await Protfs.runProgram("/bin/bash", [root + "/scripts/man.sh", out, Protfs.binary])
    #expect(written.status == 0, "\(written)")
    let commands = try await Protfs.run(["help", "--commands"])
    let paths = commands.stdout.split(separator: "\n").map(String.init)
    #expect(paths.first == "protfs" && paths.contains("protfs app launch") && paths.contains("protfs completion"))
    #expect(!paths.contains { $0.contains("__") }, "hidden commands get no page: \(paths)")
    let pages = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
    #expect(pages.count == paths.count, "\(pages)")
    for path in paths {
      let page = out + "/" + path.replacingOccurrences(of: " ", with: "-") + ".1"
      let warnings = try await Protfs.runProgram("/usr/bin/groff", ["-man", "-Tutf8", "-ww", "-Wbreak", "-z", page])
      #expect(warnings.status == 0 && warnings.stderr.isEmpty, "\(page): \(warnings)")
      let shown = try await Protfs.runProgram(
        "/usr/bin/man", ["-l", page], environment: ["MANPAGER": "cat", "MANWIDTH": "100"])
      #expect(
        shown.status == 0 && shown.stdout.contains("NAME") && shown.stdout.contains("OPTIONS"), "\(page): \(shown)")
    }
    // The page says what --help says: the lock's grace, as the command describes it.
    let lock = try await Protfs.runProgram(
      "/usr/bin/man", ["-l", out + "/protfs-lock.1"], environment: ["MANPAGER": "cat", "MANWIDTH": "200"])
    #expect(lock.stdout.contains("--grace <seconds>") && lock.stdout.contains("10 s by default"), "\(lock)")
  }
}
