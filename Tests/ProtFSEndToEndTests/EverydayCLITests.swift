import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// What a user meets at the command line (issue 64): the default device, errors in protfs's own
/// words, both spellings of a bundle id, help's format flags, `ls` without a path, and passcodes
/// given where other users see them.
@Suite struct EverydayCLITests {
  static let app = "com.example.app"

  /// The default device, under a home only its owner may enter (root's `/root` is 0700): init says
  /// where it made it and warns that the app user cannot reach it; exec then names the directory
  /// and the options that choose another device.
  @Test func theDefaultDeviceIsNamedAndAnUnreachableOneIsWarnedOf() async throws {
    let t = try TestDevice(initialize: false)
    let home = t.directory + "/home"
    #expect(mkdir(home, 0o700) == 0)
    let environment = ["HOME": home]
    let device = home + "/.local/share/protfs/device"
    let made = try await Protfs.run(["init", Self.app], environment: environment)
    #expect(made.status == 0, "\(made)")
    #expect(made.stderr.contains("note: made the device '\(device)', the default; --device DIR or $PROTFS_DEVICE"))
    let again = try await Protfs.run(["init", Self.app], environment: environment)
    #expect(again.status == 0 && !again.stderr.contains("made the device"), "\(again)")
    let named = try await Protfs.run(["--device", t.directory + "/other", "init", Self.app])
    #expect(named.status == 0 && !named.stderr.contains("made the device"), "\(named)")
    guard geteuid() == 0 else { return }
    #expect(made.stderr.contains("warning: The app user 501:501"), "\(made)")
    #expect(made.stderr.contains("may not enter '\(home)' (mode 0700"), "\(made)")
    #expect(made.stderr.contains("--device DIR or $PROTFS_DEVICE"), "\(made)")
    #expect(!named.stderr.contains("warning:"), "\(named)")
    let exec = try await Protfs.run(["exec", "--", "true"], environment: environment)
    #expect(exec.status == 1, "\(exec)")
    #expect(exec.stderr.contains("may not enter '\(home)'") && exec.stderr.contains("--device DIR"), "\(exec)")
  }

  /// A regular file given as the device: protfs's own sentence naming it, for init and status alike.
  @Test func aFileAsTheDeviceIsNamedInOurOwnWords() async throws {
    let t = try TestDevice(initialize: false)
    let file = t.directory + "/plain"
    try "x".write(toFile: file, atomically: false, encoding: .utf8)
    for command in [["init", Self.app], ["status"], ["init-cache", Self.app]] {
      let result = try await Protfs.run(["--device", file] + command)
      #expect(result.status == 1, "\(command): \(result)")
      #expect(
        result.stderr.contains(
          "The device path '\(file)' is a file, not a device directory; give --device a directory"), "\(result)")
      #expect(!result.stderr.contains("could not be completed") && !result.stderr.contains(".."), "\(result)")
      #expect(!result.stderr.contains("not been initialised"), "\(result)")
    }
    let below = try await Protfs.run(["--device", file + "/device", "init", Self.app])
    #expect(below.status == 1, "\(below)")
    #expect(below.stderr.contains("Cannot create the device directory '\(file)/device': Not a directory."), "\(below)")
  }

  /// `help CMD --man` and `help --markdown CMD`, as `help --man CMD` is.
  @Test func helpsFormatFlagsComeBeforeOrAfterTheCommand() async throws {
    let manual = try await Protfs.run(["help", "--man", "lock"])
    #expect(manual.status == 0 && manual.stdout.contains(".TH"), "\(manual)")
    #expect(try await Protfs.run(["help", "lock", "--man"]).stdout == manual.stdout)
    let markdown = try await Protfs.run(["help", "--markdown", "lock"])
    #expect(markdown.status == 0 && markdown.stdout.hasPrefix("## protfs lock\n"), "\(markdown)")
    #expect(try await Protfs.run(["help", "lock", "--markdown"]).stdout == markdown.stdout)
    let nested = try await Protfs.run(["help", "app", "launch", "--markdown"])
    #expect(nested.status == 0 && nested.stdout.hasPrefix("## protfs app launch\n"), "\(nested)")
    #expect(try await Protfs.run(["help", "--markdown"]).stdout.hasPrefix("# Command reference"))
    let both = try await Protfs.run(["help", "--man", "--markdown", "lock"])
    #expect(both.status == 64 && both.stderr.contains("Give one of --man, --markdown"), "\(both)")
  }

  /// `ls` without a path lists the current directory inside the device, as ls(1) does, and the
  /// device's root from outside it.
  @Test func lsWithoutAPathListsTheCurrentDirectoryInsideTheDevice() async throws {
    let t = try TestDevice(containers: [Self.app])
    let documents = t.containerPath(Self.app, "Documents")
    try t.writeFile(documents + "/note.txt")
    let inside = try await Protfs.run(["--device", t.root, "ls"], currentDirectory: documents)
    #expect(inside.status == 0, "\(inside)")
    #expect(inside.stdout.contains("note.txt") && !inside.stdout.contains("Containers"), "\(inside)")
    let outside = try await Protfs.run(["--device", t.root, "ls"], currentDirectory: "/")
    #expect(outside.status == 0 && outside.stdout.contains("Containers"), "\(outside)")
  }

  /// Every command that takes a bundle id takes both spellings, `<bundle-id>` and `--bundle`,
  /// with the same result.
  @Test(arguments: [
    (["init", "com.example.app"], ["init", "--bundle", "com.example.app"]),
    (["init-cache", "com.example.app"], ["init-cache", "--bundle", "com.example.app"]),
    (["cache", "ls", "com.example.app"], ["cache", "ls", "--bundle", "com.example.app"]),
    (["cache", "du", "com.example.app"], ["cache", "du", "--bundle", "com.example.app"]),
    (
      ["cache", "purge", "com.example.app", "--orphans"],
      ["cache", "purge", "--bundle", "com.example.app", "--orphans"]
    ),
    (["app", "status", "com.example.app"], ["app", "status", "--bundle", "com.example.app"]),
    (["app", "container", "com.example.app", "data"], ["app", "container", "--bundle", "com.example.app", "data"]),
    (["app", "container", "com.example.app", "data"], ["app", "container", "data", "--bundle", "com.example.app"]),
    (["app", "terminate", "com.example.app"], ["app", "terminate", "--bundle", "com.example.app"]),
    (["app", "requests", "com.example.app"], ["app", "requests", "--bundle", "com.example.app"]),
    (
      ["app", "install", "com.example.app", "--", "true"],
      ["app", "install", "--bundle", "com.example.app", "--", "true"]
    ),
    (["app", "location", "com.example.app", "1,2"], ["app", "location", "1,2", "--bundle", "com.example.app"]),
    (["app", "expire", "com.example.app", "t"], ["app", "expire", "--bundle", "com.example.app", "t"]),
    (
      ["app", "launch", "com.example.app", "--", "true"],
      ["app", "launch", "--bundle", "com.example.app", "--", "true"]
    ),
    (["ls", "--bundle", "com.example.app"], ["ls", "com.example.app"]),
    (["ls", "--bundle", "com.example.app", "Documents"], ["ls", "com.example.app", "Documents"]),
    (["get-class", "--bundle", "com.example.app", "Documents"], ["get-class", "com.example.app", "Documents"]),
    (["set-class", "--bundle", "com.example.app", "none", "tmp"], ["set-class", "com.example.app", "none", "tmp"]),
    (["audit", "--bundle", "com.example.app"], ["audit", "com.example.app"]),
    (
      ["download", "--bundle", "com.example.app", "file:///etc/hostname"],
      ["download", "com.example.app", "file:///etc/hostname"]
    ),
    (
      ["upload", "--bundle", "com.example.app", "http://127.0.0.1:9/"],
      ["upload", "com.example.app", "http://127.0.0.1:9/"]
    ),
  ])
  func bothSpellingsOfABundleIDAreAccepted(_ canonical: [String], _ other: [String]) async throws {
    let t = try TestDevice(containers: [Self.app, "com.example.other"])
    let first = try await Protfs.run(["--device", t.root] + canonical, currentDirectory: t.directory)
    let second = try await Protfs.run(["--device", t.root] + other, currentDirectory: t.directory)
    #expect(first.status == second.status, "\(first)\n\(second)")
    #expect(first.status != 64 || first.stderr.contains("Missing '--from <path>'"), "\(first)")
    if !canonical.contains("download") && !canonical.contains("launch") {
      #expect(first.stdout == second.stdout, "\(first)\n\(second)")
    }
  }

  /// Two bundle ids that disagree are one usage error, whichever spelling each has.
  @Test func twoBundleIDsThatDisagreeAreRefused() async throws {
    let t = try TestDevice(containers: [Self.app, "com.example.other"])
    for command in [
      ["app", "status", Self.app, "--bundle", "com.example.other"],
      ["init", Self.app, "--bundle", "com.example.other"],
      ["ls", "com.example.other", "--bundle", Self.app],
      ["get-class", "com.example.other", "Documents", "--bundle", Self.app],
    ] {
      let result = try await Protfs.run(["--device", t.root] + command, currentDirectory: t.directory)
      #expect(result.status == 64, "\(command): \(result)")
      #expect(result.stderr.contains("com.example.other") && result.stderr.contains("give"), "\(result)")
    }
  }

  /// `upload`'s usage shows --from as required, and a file given as an argument is pointed to it.
  @Test func uploadsFileIsGivenWithFrom() async throws {
    let t = try TestDevice(containers: [Self.app])
    let help = try await Protfs.run(["upload", "--help"])
    #expect(help.stdout.contains(" --from <path> ") && !help.stdout.contains("[--from <path>]"), "\(help)")
    let result = try await Protfs.run(
      ["--device", t.root, "upload", "--bundle", Self.app, "Documents/r.txt", "http://127.0.0.1:9/"])
    #expect(result.status == 64, "\(result)")
    #expect(result.stderr.contains("did you mean '--from Documents/r.txt http://127.0.0.1:9/'?"), "\(result)")
  }

  /// A passcode on the command line works, with a warning naming the ways other users cannot see.
  @Test func aPasscodeOnTheCommandLineIsWarnedOf() async throws {
    let t = try TestDevice(containers: [Self.app])
    let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]
    let set = try await Protfs.run(["--device", t.root, "passcode", "set", "--passcode", "1234"], environment: cheap)
    #expect(set.status == 0, "\(set)")
    #expect(set.stderr.contains("warning: --passcode puts the passcode where other users can read it (ps"), "\(set)")
    #expect(set.stderr.contains("--passcode-file FILE (- for standard input), $PROTFS_PASSCODE or the prompt"))
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let unlock = try await Protfs.run(
      ["--device", t.root, "unlock", "--passcode-file", "-"], environment: cheap, stdin: "1234\n")
    #expect(unlock.status == 0 && !unlock.stderr.contains("warning"), "\(unlock)")
  }
}
