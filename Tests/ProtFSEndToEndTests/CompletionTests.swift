import Foundation
import ProtFSTestSupport
import Testing

/// `protfs completion bash|zsh|fish`, loaded into the real shells as users load it.
@Suite struct CompletionTests {
  /// Writes the script for `shell` to a file of its own and returns its path.
  static func script(_ shell: String, in t: TestDevice) async throws -> String {
    let result = try await Protfs.run(["completion", shell])
    #expect(result.status == 0, "\(result)")
    let path = t.directory + "/protfs.\(shell)"
    try result.stdout.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  @Test func bashCompletesSubcommandsOptionsClassesAndBundleIDs() async throws {
    let t = try TestDevice(containers: ["com.example.app", "com.example.other"])
    let script = try await Self.script("bash", in: t)
    // What bash's completion machinery does: COMP_WORDS and COMP_CWORD set, the function called.
    let probe = """
      source '\(script)'
      complete -p protfs
      t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _protfs; echo "${COMPREPLY[*]}"; }
      t protfs in
      t protfs app la
      t protfs app launch --suspend-
      t protfs set-class unl
      t protfs init com.example.new --default-class until
      t protfs --device '\(t.root)' app launch com.example.o
      """
    let result = try await Protfs.runProgram("/bin/bash", ["--norc", "-c", probe])
    #expect(result.status == 0, "\(result)")
    #expect(
      result.stdout.split(separator: "\n").map(String.init) == [
        "complete -F _protfs protfs", "init init-cache inspect", "launch", "--suspend-after", "unless-open",
        "until-first-auth", "com.example.other",
      ], "\(result)")
  }

  @Test func bashCompletesPathsInTheContainerThatBundleNames() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let script = try await Self.script("bash", in: t)
    let probe = """
      source '\(script)'
      cd /
      t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _protfs; echo "${COMPREPLY[*]}"; }
      t protfs --device '\(t.root)' get-class --bundle com.example.app Docu
      t protfs --device '\(t.root)' set-class --bundle com.example.app none Library/Pref
      t protfs --device '\(t.root)' download --bundle com.example.app --to Library/Cach
      t protfs --device '\(t.root)' get-class et
      """
    let result = try await Protfs.runProgram("/bin/bash", ["--norc", "-c", probe])
    #expect(result.status == 0, "\(result)")
    #expect(
      result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == [
        "Documents", "Library/Preferences", "Library/Caches", "etc", "",
      ], "\(result)")
  }

  /// Options whose values are a fixed set complete to those values, never to file names; a policy
  /// to the installed names and files (issue 64).
  @Test func bashCompletesTheValuesOfOptionsWithAFixedSet() async throws {
    let t = try TestDevice(containers: [])
    let script = try await Self.script("bash", in: t)
    let empty = t.directory + "/empty"
    #expect(mkdir(empty, 0o755) == 0)
    try "".write(toFile: empty + "/strange.policy", atomically: false, encoding: .utf8)
    let probe = """
      source '\(script)'
      cd '\(empty)'
      t() { COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _protfs; echo "${COMPREPLY[*]}"; }
      t protfs audit --format ''
      t protfs audit --fail-on w
      t protfs upload -X P
      t protfs download --progress ''
      t protfs audit --policy st
      """
    let result = try await Protfs.runProgram("/bin/bash", ["--norc", "-c", probe])
    #expect(result.status == 0, "\(result)")
    #expect(
      result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == [
        "text json sarif junit", "warning", "PUT POST", "auto bar json none", "strange.policy strict", "",
      ], "\(result)")
  }

  @Test func fishCompletesFromItsOwnScript() async throws {
    let t = try TestDevice(containers: [])
    let script = try await Self.script("fish", in: t)
    let result = try await Protfs.runProgram(
      "/usr/bin/fish",
      ["--no-config", "-c", "source '\(script)'; complete -C 'protfs app la'; complete -C 'protfs set-class unl'"])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout.hasPrefix("launch\tRun a program as the app"), "\(result)")
    #expect(result.stdout.contains("unless-open\n"), "\(result)")
    let format = try await Protfs.runProgram(
      "/usr/bin/fish", ["--no-config", "-c", "source '\(script)'; complete -C 'protfs audit --format '"],
      currentDirectory: t.directory)
    let values = Set(format.stdout.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) })
    #expect(values == ["text", "json", "sarif", "junit"], "\(format)")
  }

  @Test func zshLoadsTheScriptAndRegistersTheCompletion() async throws {
    let t = try TestDevice(containers: [])
    let script = try await Self.script("zsh", in: t)
    let result = try await Protfs.runProgram(
      "/usr/bin/zsh",
      [
        "-f", "-c",
        "autoload -U compinit && compinit -u -d '\(t.directory)/zcompdump'; source '\(script)'; complete -p protfs",
      ])
    #expect(result.status == 0 && result.stdout.contains("complete -F _protfs protfs\n"), "\(result)")
    let unknown = try await Protfs.run(["completion", "tcsh"])
    #expect(unknown.status == 64 && unknown.stderr.contains("'tcsh' is not a shell protfs completes"), "\(unknown)")
  }
}
