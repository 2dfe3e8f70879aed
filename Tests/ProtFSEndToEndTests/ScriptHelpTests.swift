import Foundation
import ProtFSTestSupport
import Testing

/// Every script of `scripts/` answers `--help` with its usage, and an unknown option with a usage
/// error, and neither takes the option for a path and writes there.
@Suite(.timeLimit(.minutes(2))) struct ScriptHelpTests {
  /// The scripts of `scripts/`, with the interpreter each runs in.
  static func scripts() throws -> [(name: String, interpreter: String)] {
    try FileManager.default.contentsOfDirectory(atPath: RepositoryLayout.packageRoot + "/scripts").sorted().compactMap {
      if $0.hasSuffix(".sh") { return ($0, "/bin/bash") }
      if $0.hasSuffix(".py") { return ($0, "/usr/bin/python3") }
      return nil
    }
  }

  @Test func everyScriptAnswersHelpAndUnknownOptionsWithoutWritingAnything() async throws {
    let t = try TestDevice(containers: [])
    let scripts = try Self.scripts()
    #expect(scripts.contains { $0.name == "make-backup.py" } && scripts.contains { $0.name == "man.sh" })
    // Without the toolchain on PATH: a script that took `--help` for something else to do (a
    // build, the suite) fails at once instead of doing it.
    let environment = ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"]
    for (name, interpreter) in scripts {
      let script = RepositoryLayout.packageRoot + "/scripts/" + name
      let cwd = t.directory + "/" + name
      try FileManager.default.createDirectory(atPath: cwd, withIntermediateDirectories: false)
      let help = try await Protfs.runProgram(
        interpreter, [script, "--help"], environment: environment, currentDirectory: cwd)
      #expect(help.status == 0 && help.stdout.contains("scripts/" + name) && help.stderr.isEmpty, "\(name): \(help)")
      // test.sh hands its arguments to `swift test`.
      if name != "test.sh" {
        let unknown = try await Protfs.runProgram(
          interpreter, [script, "--no-such-option"], environment: environment, currentDirectory: cwd)
        // Python's argparse exits 2 on a usage error; the shell scripts exit 64 as protfs does.
        #expect(
          unknown.status == (name.hasSuffix(".py") ? 2 : 64) && unknown.stderr.lowercased().contains("usage"),
          "\(name): \(unknown)")
      }
      #expect(try FileManager.default.contentsOfDirectory(atPath: cwd).isEmpty, "\(name) wrote into \(cwd)")
    }
    for option in ["--help", "--no-such-option"] {
      #expect(
        !FileManager.default.fileExists(atPath: RepositoryLayout.packageRoot + "/" + option),
        "a script wrote '\(option)' into the repository")
    }
  }
}
