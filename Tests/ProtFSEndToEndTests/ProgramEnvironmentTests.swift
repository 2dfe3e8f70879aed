import Foundation
import ProtFSTestSupport
import Testing

/// A program of untrusted code starts with an environment built for it, never root's (issue 61):
/// the shell that runs protfs holds tokens, a key agent and root's home, and `exec` and every app
/// launch would hand them to the app user. Only what the caller passes on purpose reaches it
/// (`PROTFS_CHILD_NAME`, `--env NAME=VALUE`), as simctl passes only `SIMCTL_CHILD_` variables.
@Suite(.timeLimit(.minutes(2))) struct ProgramEnvironmentTests {
  /// Root's secrets, as a CI job's shell holds them.
  static let rootsSecrets = [
    "GITHUB_TOKEN": "ghp_rootsToken", "AWS_SECRET_ACCESS_KEY": "rootsAWSKey",
    "DATABASE_URL": "postgres://root:pw@127.0.0.1/db", "SSH_AUTH_SOCK": "/tmp/ssh-root/agent.1",
    "HOME": "/root", "LD_PRELOAD": "", "PROTFS_CHILD_GREETING": "hello", "PROTFS_CHILD_1BAD": "x",
  ]

  /// The program's environment, one NAME=value a line, as `env` prints it.
  static func environment(of result: RunResult) -> [String: String] {
    Dictionary(
      result.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
        guard let equals = line.firstIndex(of: "=") else { return nil }
        return (String(line[..<equals]), String(line[line.index(after: equals)...]))
      }, uniquingKeysWith: { _, last in last })
  }

  @Test func execGivesTheProgramNothingOfRootsEnvironment() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let run = try await Protfs.run(
      ["--device", d.root, "exec", "--env", "API_URL=http://127.0.0.1:9", "--", "env"], environment: Self.rootsSecrets)
    #expect(run.status == 0, "\(run)")
    let seen = Self.environment(of: run)
    for name in ["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL", "SSH_AUTH_SOCK", "LD_PRELOAD"] {
      #expect(seen[name] == nil, "\(name) reached the program: \(seen)")
    }
    #expect(!run.stdout.contains("ghp_rootsToken") && !run.stdout.contains("rootsAWSKey"))
    #expect(seen["HOME"] == "/" && seen["PATH"]?.hasPrefix("/usr/local/bin:/usr/bin:/bin") == true, "\(seen)")
    // What the caller passes on purpose: PROTFS_CHILD_NAME as NAME, and --env.
    #expect(seen["GREETING"] == "hello" && seen["API_URL"] == "http://127.0.0.1:9", "\(seen)")
    #expect(seen["1BAD"] == nil && seen["PROTFS_CHILD_GREETING"] == nil, "\(seen)")
    // A program found on the caller's PATH still runs (CMD is the caller's to name).
    let tools = d.scripts + "/bin"
    try FileManager.default.createDirectory(atPath: tools, withIntermediateDirectories: true)
    chmod(tools, 0o755)
    _ = try d.script("bin/only-here", "#!/bin/sh\necho found \"$PATH\"\n")
    let found = try await Protfs.run(
      ["--device", d.root, "exec", "--", "only-here"], environment: ["PATH": tools + ":/usr/bin:/bin"])
    #expect(found.status == 0 && found.stdout.hasPrefix("found /usr/local/bin:/usr/bin:/bin"), "\(found)")
  }

  @Test func anAppGetsItsOwnEnvironmentAndWhatItsCallerPasses() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let run = try await Protfs.run(
      ["--device", d.root, "app", "launch", AppDevice.bundle, "--no-mount", "--env", "MODE=test", "--", "env"],
      environment: Self.rootsSecrets)
    #expect(run.status == 0, "\(run)")
    let seen = Self.environment(of: run)
    #expect(!run.stdout.contains("ghp_rootsToken") && seen["SSH_AUTH_SOCK"] == nil && seen["DATABASE_URL"] == nil)
    let container = d.t.containerPath(AppDevice.bundle)
    #expect(seen["HOME"] == container && seen["CFFIXED_USER_HOME"] == container, "\(seen)")
    #expect(seen["TMPDIR"] == container + "/tmp/" && seen["PROTFS_APP_BUNDLE"] == AppDevice.bundle, "\(seen)")
    #expect(seen["PATH"]?.hasPrefix("/usr/local/bin:/usr/bin:/bin") == true && seen["LANG"] != nil, "\(seen)")
    #expect(seen["GREETING"] == "hello" && seen["MODE"] == "test", "\(seen)")
    // The system's variables are the app's own: the caller cannot replace them.
    let replaced = try await Protfs.run(
      ["--device", d.root, "app", "launch", AppDevice.bundle, "--no-mount", "--env", "HOME=/root", "--", "env"])
    #expect(Self.environment(of: replaced)["HOME"] == container, "\(replaced)")
  }

  @Test(arguments: ["1BAD=x", "NO_EQUALS", "=value", "BAD-NAME=x"])
  func aValueThatNamesNoVariableIsAUsageError(_ value: String) async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let run = try await Protfs.run(["--device", d.root, "exec", "--env", value, "--", "true"])
    #expect(run.status == 64 && run.stderr.contains("is not NAME=VALUE"), "\(run)")
  }
}
