import Foundation
import ProtFSTestSupport
import Testing

/// `docs/cli.md`, the command reference, is exactly what `protfs help --markdown` prints, so it says
/// what `--help` says and never drifts from the command tree.
@Suite struct CLIReferenceTests {
  @Test func docsCLIIsWhatTheBinaryGenerates() async throws {
    let generated = try await Protfs.run(["help", "--markdown"])
    #expect(generated.status == 0 && generated.stderr.isEmpty, "\(generated)")
    let committed = try String(contentsOfFile: RepositoryLayout.packageRoot + "/docs/cli.md", encoding: .utf8)
    let expected = generated.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let actual = committed.split(separator: "\n", omittingEmptySubsequences: false)
    let line =
      (0..<min(expected.count, actual.count)).first { expected[$0] != actual[$0] } ?? min(expected.count, actual.count)
    #expect(
      committed == generated.stdout,
      """
      docs/cli.md is not what `protfs help --markdown` prints (first difference at line \(line + 1): \
      generated "\(line < expected.count ? expected[line] : "<end>")", \
      file "\(line < actual.count ? actual[line] : "<end>")"): run `bash scripts/cli-doc.sh` and commit docs/cli.md.
      """)
  }

  @Test func everyVisibleCommandHasASectionThatTheListLinksTo() async throws {
    let reference = try await Protfs.run(["help", "--markdown"]).stdout
    let commands = try await Protfs.run(["help", "--commands"]).stdout.split(separator: "\n")
    #expect(commands.count > 40, "\(commands)")
    for command in commands {
      #expect(reference.contains("\n## \(command)\n"), "no section for \(command)")
      let anchor = command.replacingOccurrences(of: " ", with: "-")
      #expect(command == "protfs" || reference.contains("(#\(anchor))"), "nothing links to \(command)")
    }
    // What --help says is there: the lock's grace, and an example.
    #expect(reference.contains("- `--grace <seconds>`: ") && reference.contains("protfs lock --grace 0"))
    // Placeholders are escaped outside code, so that a renderer shows them rather than taking them for HTML.
    #expect(reference.contains(#"Creates \<device>/Containers/\<bundle-id>/"#), "\(reference.prefix(2000))")
  }
}
