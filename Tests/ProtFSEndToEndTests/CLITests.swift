import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// The command-line contract (README): help at every level, --version, exit 0 / 64 / 1.
@Suite struct CLIContractTests {
  @Test func helpAtEveryLevelGoesToStdoutWithStatusZero() async throws {
    for arguments in [
      ["--help"], ["-h"], ["help"], ["init", "--help"], ["help", "init-cache"], ["set-class", "-h"],
      ["get-class", "--help"], ["ls", "--help"],
    ] {
      let result = try await Protfs.run(arguments)
      #expect(result.status == 0, "\(arguments): \(result)")
      #expect(result.stdout.contains("OVERVIEW:") && result.stdout.contains("USAGE: protfs"), "\(arguments)")
      #expect(result.stdout.contains("OPTIONS:") && result.stderr.isEmpty)
    }
    let top = try await Protfs.run(["--help"])
    for command in ["init", "init-cache", "set-class", "get-class", "ls"] {
      #expect(top.stdout.contains("\n  \(command) "), "\(command) missing from help")
    }
    #expect(try await Protfs.run(["init-cache", "--help"]).stdout.contains("ARGUMENTS:\n  <bundle-id>"))
  }

  @Test func helpAfterASubcommandGroupIsHelpForTheSubcommand() async throws {
    for (arguments, usage) in [
      (["passcode", "help", "set"], "USAGE: protfs passcode set"),
      (["cache", "help", "purge"], "USAGE: protfs cache purge"),
      (["passcode", "help"], "USAGE: protfs passcode"),
    ] {
      let result = try await Protfs.run(arguments)
      #expect(result.status == 0, "\(arguments): \(result)")
      #expect(result.stdout.contains(usage) && result.stderr.isEmpty, "\(arguments): \(result)")
    }
  }

  @Test func versionAndBareCommand() async throws {
    let version = try await Protfs.run(["--version"])
    #expect(version.status == 0 && version.output == "protfs \(ProtFSVersion.current)")
    let bare = try await Protfs.run([])
    #expect(bare.status == 0 && bare.stdout.contains("SUBCOMMANDS:"))
  }

  @Test(arguments: [
    (["lokc"], "Unknown command 'lokc'"), (["init-cach", "com.example.app"], "Did you mean 'init-cache'?"),
    (["init-cache"], "Missing expected argument '<bundle-id>'"),
    (["init"], "Give the app's bundle id, or --from-app APP to take it from the app."),
    (["init", "com.a.b", "extra"], "Unexpected argument 'extra'"),
    (["init", "com.a.b", "--defualt-class", "none"], "Did you mean '--default-class'?"),
    (["init", "com.a.b", "--default-class"], "Missing value for '--default-class <class>'"),
    (["init", "com.a.b", "--default-class", "compelte"], "Did you mean 'complete'?"),
    (["set-class", "none"], "Missing expected argument '<path> ...'"),
    (["ls", "--json=yes"], "does not take a value"),
  ])
  func usageErrorsExit64WithUsageAndHint(arguments: [String], message: String) async throws {
    try await expectUsageError(arguments, message)
  }

  /// Numbers out of range are usage errors, never a trap or an endless wait.
  static let outOfRange: [([String], String)] = [
    (["exec", "--schedule", "lock@1e10s", "--", "true"], "'1e10s' is later than 7 days after the start"),
    (["exec", "--schedule", "lock@1e300", "--", "true"], "is later than 7 days"),
    (["exec", "--schedule", "lock@nan", "--", "true"], "'nan' is not a time"),
    (
      ["exec", "--schedule", Array(repeating: "lock@1s", count: 10_001).joined(separator: ","), "--", "true"],
      "more than the 10000 a schedule may have"
    ),
    (["lock", "--grace", "1e300"], "The grace period '1e300' is out of range: give 0 to 86400 seconds"),
    (["lock", "--grace", "-1"], "The grace period '-1' is out of range"),
    (["lock", "--grace", "inf"], "is not a number of seconds"),
    (
      ["cache", "purge", "--older-than", "99999999999999999999w"],
      "The duration '99999999999999999999w' is out of range"
    ),
    (["cache", "purge", "--max-size", "1e30"], "'1e30' is not a size"),
    (["cache", "purge", "--max-size", "99999999T"], "'99999999T' is not a size"),
    (["passcode", "help", "sett"], "Did you mean 'set'?"),
  ]

  @Test(arguments: outOfRange)
  func numbersOutOfRangeAreUsageErrors(arguments: [String], message: String) async throws {
    try await expectUsageError(arguments, message)
  }

  private func expectUsageError(_ arguments: [String], _ message: String) async throws {
    let t = try TestDevice()
    let result = try await Protfs.run(["--device", t.root] + arguments)
    #expect(result.status == 64, "\(result)")
    #expect(result.stdout.isEmpty)
    #expect(result.stderr.hasPrefix("Error: ") && result.stderr.contains(message), "\(result)")
    #expect(result.stderr.contains("Usage: protfs") && result.stderr.contains("--help' for more information."))
  }

  @Test func optionsAcceptEqualsFormAndDeviceAnywhere() async throws {
    let t = try TestDevice()
    let a = try await Protfs.run(["init", "--default-class=complete", "com.example.a", "--device=\(t.root)"])
    #expect(a.status == 0, "\(a)")
    #expect(
      TestDevice.rawAttribute(t.containerPath("com.example.a"), AttributeName.defaultClass)
        == "NSFileProtectionComplete")
    let b = try await Protfs.run(["init", "com.example.b"], environment: ["PROTFS_DEVICE": t.root])
    #expect(b.status == 0 && b.output == t.containerPath("com.example.b"))
    let home = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(home) }
    let c = try await Protfs.run(["init", "com.example.c"], environment: ["XDG_DATA_HOME": home])
    #expect(c.output == home + "/protfs/device/Containers/com.example.c")
  }
}

@Suite struct InitCacheEndToEndTests {
  @Test func printsTheDownloadsDirectoryWithClassNone() async throws {
    let t = try TestDevice(initialize: false)
    let result = try await Protfs.run(["--device", t.root, "init-cache", "com.example.app"])
    let expected =
      t.root + "/Containers/com.example.app/Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.app"
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout == expected + "\n")
    // getfattr, the tool users reach for, shows the raw value.
    let getfattr = try await Protfs.runProgram(
      "/usr/bin/getfattr", ["--only-values", "-n", "user.protfs.class", expected])
    #expect(getfattr.stdout == "NSFileProtectionNone")
    let again = try await Protfs.run(["--device", t.root, "init-cache", "com.example.app"])
    #expect(again.status == 0 && again.stdout == expected + "\n" && again.stderr.isEmpty)
    let changed = try await Protfs.run([
      "--device", t.root, "init-cache", "com.example.app", "--class", "until-first-auth",
    ])
    #expect(changed.status == 0 && changed.stdout == expected + "\n")
    #expect(changed.stderr.contains("from none (own) to complete-until-first-user-authentication"))
    #expect(t.rawClass(expected) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
  }

  @Test(arguments: ["..", "com/example", "", "com example.app", "app", String(repeating: "x", count: 256) + ".com"])
  func badBundleIDsChangeNothing(bundleID: String) async throws {
    let t = try TestDevice(initialize: false)
    let result = try await Protfs.run(["--device", t.root, "init-cache", bundleID])
    #expect(result.status == 64, "\(result)")
    #expect(result.stderr.contains("is not a valid bundle identifier"))
    #expect(!FileManager.default.fileExists(atPath: t.root))
  }
}

@Suite struct InitEndToEndTests {
  @Test func createsTheContainerLayout() async throws {
    let t = try TestDevice()
    let result = try await Protfs.run(["--device", t.root, "init", "com.example.app"])
    #expect(result.status == 0 && result.output == t.containerPath("com.example.app"))
    #expect(
      result.stderr.contains(
        "Created container com.example.app (default class complete-until-first-user-authentication)"))
    for dir in Container.standardDirectories {
      #expect(
        t.rawClass(t.containerPath("com.example.app", dir)) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    }
    let again = try await Protfs.run(["--device", t.root, "init", "com.example.app"])
    #expect(again.status == 0 && again.stderr.contains("already exists"))
  }

  @Test func takesTheDefaultClassFromEntitlements() async throws {
    let t = try TestDevice()
    let plist = try PropertyListSerialization.data(
      fromPropertyList: [Entitlements.defaultDataProtectionKey: "NSFileProtectionComplete"], format: .binary, options: 0
    )
    let path = t.directory + "/App.entitlements"
    try plist.write(to: URL(fileURLWithPath: path))
    let result = try await Protfs.run(["--device", t.root, "init", "com.example.app", "--entitlements", path])
    #expect(result.status == 0, "\(result)")
    #expect(t.rawClass(t.containerPath("com.example.app", "Documents")) == "NSFileProtectionComplete")
  }

  @Test func badEntitlementsCreateNothing() async throws {
    let t = try TestDevice()
    let path = t.directory + "/broken.entitlements"
    try Data("<plist><dict><key>x".utf8).write(to: URL(fileURLWithPath: path))
    for (file, message) in [
      (path, "is not a property list"), (t.directory + "/missing.plist", "Cannot read the entitlements file"),
    ] {
      let result = try await Protfs.run(["--device", t.root, "init", "com.example.app", "--entitlements", file])
      #expect(result.status == 1 && result.stderr.contains(message) && result.stderr.contains(file), "\(result)")
      #expect(!FileManager.default.fileExists(atPath: t.containerPath("com.example.app")))
    }
    let both = try await Protfs.run([
      "--device", t.root, "init", "com.example.app", "--entitlements", path, "--default-class", "none",
    ])
    #expect(both.status == 64)
  }

  @Test func refusesAFilesystemWithoutUserXattrs() async throws {
    let base = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(base) }
    try #require(mount("none", base, "ramfs", 0, nil) == 0)
    defer { umount(base) }
    let result = try await Protfs.run(["--device", base + "/dev", "init", "com.example.app"])
    #expect(result.status == 1)
    #expect(
      result.stderr.contains("'\(base)/dev'") && result.stderr.contains("does not support user extended attributes"))
    #expect((try? FileManager.default.contentsOfDirectory(atPath: base + "/dev")) ?? [] == [])
  }
}

@Suite struct ClassCommandsEndToEndTests {
  @Test func setAndGetClassWithSourcesAndJSON() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let documents = t.containerPath("com.example.app", "Documents")
    try t.writeFile(documents + "/a.txt")
    #expect(try await Protfs.run(["--device", t.root, "set-class", "complete", documents]).status == 0)
    let text = try await Protfs.run([
      "--device", t.root, "get-class", documents, documents + "/a.txt", t.containerPath("com.example.app"),
    ])
    #expect(text.status == 0, "\(text)")
    let lines = text.stdout.split(separator: "\n").map {
      $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    }
    #expect(lines[0] == ["NSFileProtectionComplete", "own", documents])
    #expect(lines[1] == ["NSFileProtectionComplete", "inherited", documents + "/a.txt"])
    #expect(
      lines[2] == [
        "NSFileProtectionCompleteUntilFirstUserAuthentication", "default", t.containerPath("com.example.app"),
      ])
    let json = try await Protfs.run(["--device", t.root, "get-class", "--json", documents + "/a.txt"])
    let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as! [[String: String]]
    #expect(
      rows == [
        [
          "path": documents + "/a.txt", "kind": "file", "classRawValue": "NSFileProtectionComplete",
          "className": "complete", "source": "inherited",
        ]
      ])
  }

  @Test func relativePathsAndRecursive() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let container = t.containerPath("com.example.app")
    try t.writeFile(container + "/Documents/x.txt")
    let result = try await Protfs.run(
      ["--device", t.root, "set-class", "-r", "unless-open", "Documents"], currentDirectory: container)
    #expect(result.status == 0 && result.stderr.contains("Set complete-unless-open on 2 items"), "\(result)")
    #expect(t.rawClass(container + "/Documents/x.txt") == "NSFileProtectionCompleteUnlessOpen")
  }

  @Test func oneBadPathChangesNothing() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let good = t.containerPath("com.example.app", "Documents")
    for bad in ["/etc/passwd", t.root + "/../outside", t.containerPath("com.example.app", "missing")] {
      let result = try await Protfs.run(["--device", t.root, "set-class", "none", good, bad])
      #expect(result.status == 1, "\(result)")
      #expect(result.stderr.hasPrefix("Error: ") && result.stderr.contains(bad.hasSuffix("missing") ? "missing" : bad))
      #expect(t.rawClass(good) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    }
    #expect(TestDevice.rawAttribute("/etc/passwd", AttributeName.protectionClass) == nil)
  }

  @Test func symlinksOutOfTheDeviceAreNotFollowed() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let outside = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(outside) }
    let link = t.containerPath("com.example.app", "Documents/escape")
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: outside)
    let direct = try await Protfs.run(["--device", t.root, "set-class", "none", link])
    #expect(direct.status == 1 && direct.stderr.contains("symbolic link"), "\(direct)")
    let through = try await Protfs.run(["--device", t.root, "set-class", "none", link + "/file"])
    #expect(through.status == 1 && through.stderr.contains("symbolic link"), "\(through)")
    let recursive = try await Protfs.run([
      "--device", t.root, "set-class", "-r", "none", t.containerPath("com.example.app", "Documents"),
    ])
    #expect(recursive.status == 0 && recursive.stderr.contains("left \(link) alone"))
    #expect(TestDevice.rawAttribute(outside, AttributeName.protectionClass) == nil)
  }

  @Test func followIsExplicitAndStaysInsideTheDevice() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let documents = t.containerPath("com.example.app", "Documents")
    try t.writeFile(documents + "/target.txt")
    _ = try await Protfs.run(["--device", t.root, "set-class", "none", documents + "/target.txt"])
    try FileManager.default.createSymbolicLink(atPath: documents + "/rel", withDestinationPath: "target.txt")
    try FileManager.default.createSymbolicLink(
      atPath: documents + "/abs", withDestinationPath: documents + "/target.txt")
    try FileManager.default.createSymbolicLink(atPath: documents + "/out", withDestinationPath: "/etc/passwd")
    try FileManager.default.createSymbolicLink(atPath: documents + "/up", withDestinationPath: "../../../../..")
    try FileManager.default.createSymbolicLink(atPath: documents + "/loop1", withDestinationPath: "loop2")
    try FileManager.default.createSymbolicLink(atPath: documents + "/loop2", withDestinationPath: "loop1")
    let plain = try await Protfs.run(["--device", t.root, "get-class", documents + "/rel"])
    #expect(plain.status == 1 && plain.stderr.contains("give --follow"), "\(plain)")
    for link in ["rel", "abs"] {
      let followed = try await Protfs.run(["--device", t.root, "get-class", "-L", documents + "/" + link])
      #expect(followed.status == 0 && followed.stdout.hasPrefix("NSFileProtectionNone  own"), "\(followed)")
    }
    for link in ["out", "up"] {
      let escaped = try await Protfs.run([
        "--device", t.root, "set-class", "--follow", "complete", documents + "/" + link,
      ])
      #expect(escaped.status == 1 && escaped.stderr.contains("outside the device"), "\(escaped)")
    }
    let loop = try await Protfs.run(["--device", t.root, "get-class", "-L", documents + "/loop1"])
    #expect(loop.status == 1 && loop.stderr.contains("too many levels of symbolic links"), "\(loop)")
    #expect(TestDevice.rawAttribute("/etc/passwd", AttributeName.protectionClass) == nil)
  }

  @Test func uninitialisedDeviceSaysHowToFixIt() async throws {
    let t = try TestDevice(initialize: false)
    let result = try await Protfs.run(["--device", t.root, "get-class", t.root])
    #expect(result.status == 1)
    #expect(
      result.stderr.contains("'\(t.root)' has not been initialised")
        && result.stderr.contains("protfs --device \(t.root) init"))
  }

  @Test func corruptClassIsReportedNotCrashed() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let file = t.containerPath("com.example.app", "Documents/f")
    try t.writeFile(file)
    _ = try await Protfs.runProgram("/usr/bin/setfattr", ["-n", "user.protfs.class", "-v", "bogus", file])
    let result = try await Protfs.run(["--device", t.root, "get-class", file])
    #expect(result.status == 1 && result.stderr.contains("\"bogus\"") && result.stderr.contains("set-class"))
  }
}

@Suite struct ListEndToEndTests {
  @Test func listsClassSourceModeSizeAndName() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let documents = t.containerPath("com.example.app", "Documents")
    try t.writeFile(documents + "/notes.txt", "12345", mode: 0o600)
    try FileManager.default.createSymbolicLink(atPath: documents + "/link", withDestinationPath: "notes.txt")
    _ = try await Protfs.run(["--device", t.root, "set-class", "complete", documents + "/notes.txt"])
    let result = try await Protfs.run(["--device", t.root, "ls", documents])
    #expect(result.status == 0, "\(result)")
    let lines = result.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
    #expect(lines[0] == ["CLASS", "SOURCE", "MODE", "SIZE", "NAME"])
    #expect(lines[1] == ["-", "-", "rwxrwxrwx", "9", "link", "->", "notes.txt"])
    #expect(lines[2] == ["complete", "own", "rw-------", "5", "notes.txt"])
    let recursive = try await Protfs.run(["--device", t.root, "ls", "-R", "--json", t.containerPath("com.example.app")])
    let rows = try JSONSerialization.jsonObject(with: Data(recursive.stdout.utf8)) as! [[String: Any]]
    let notes = rows.first { $0["path"] as? String == "Documents/notes.txt" }
    #expect(notes?["classRawValue"] as? String == "NSFileProtectionComplete" && notes?["size"] as? Int == 5)
    #expect(notes?["className"] as? String == "complete")
    let tmp = rows.first { $0["path"] as? String == "tmp" }
    #expect(tmp?["source"] as? String == "own" && tmp?["kind"] as? String == "directory")
  }

  /// A container root without a class of its own shows its stored default, as get-class says.
  @Test func containerRootsShowTheirDefaultClass() async throws {
    let t = try TestDevice()
    let initialized = try await Protfs.run([
      "--device", t.root, "init", "com.example.app", "--default-class", "complete",
    ])
    #expect(initialized.status == 0, "\(initialized)")
    let app = t.containerPath("com.example.app")
    _ = try await Protfs.runProgram("/usr/bin/setfattr", ["-x", "user.protfs.class", app])
    let listing = try await Protfs.run(["--device", t.root, "ls", "--json", t.path("Containers")])
    let rows = try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as! [[String: Any]]
    let root = rows.first { $0["path"] as? String == "com.example.app" }
    #expect(root?["classRawValue"] as? String == "NSFileProtectionComplete" && root?["source"] as? String == "default")
    let got = try await Protfs.run(["--device", t.root, "get-class", "--json", app])
    #expect(got.stdout.contains("NSFileProtectionComplete") && got.stdout.contains("default"), "\(got)")
  }
}
