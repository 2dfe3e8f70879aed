import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// PATHs by bundle id: `--bundle ID` reads relative PATHs in the app's container from any
/// directory; without it they are read from the current directory, and an error says so.
@Suite struct BundlePathTests {
  static let app = "com.example.app"

  /// The line of `output` that ends with `end`, if any.
  static func row(_ output: String, endingWith end: String) -> String? {
    output.split(separator: "\n").first { $0.hasSuffix(end) }.map(String.init)
  }

  /// A device with the app's container and Documents/a.txt, and a directory outside the device.
  private func setUp() throws -> (TestDevice, elsewhere: String) {
    let t = try TestDevice(containers: [Self.app])
    try t.writeFile(t.containerPath(Self.app, "Documents/a.txt"))
    let elsewhere = t.directory + "/elsewhere"
    try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
    return (t, elsewhere)
  }

  @Test func setClassGetClassAndListWithBundleFromAnUnrelatedDirectory() async throws {
    let (t, elsewhere) = try setUp()
    func run(_ arguments: [String]) async throws -> RunResult {
      try await Protfs.run(["--device", t.root] + arguments, currentDirectory: elsewhere)
    }
    let set = try await run(["set-class", "--bundle", Self.app, "complete", "Documents/a.txt"])
    #expect(set.status == 0, "\(set)")
    #expect(t.rawClass(t.containerPath(Self.app, "Documents/a.txt")) == "NSFileProtectionComplete")
    let get = try await run(["get-class", "--bundle", Self.app, "Documents/a.txt", "./Documents/../Documents"])
    #expect(get.status == 0, "\(get)")
    #expect(Self.row(get.stdout, endingWith: "  Documents/a.txt")?.hasPrefix("NSFileProtectionComplete ") == true)
    #expect(get.stdout.contains("./Documents/../Documents\n"), "\(get)")
    // ls without a PATH lists the container; with one, the directory inside it.
    let list = try await run(["ls", "-R", "--bundle", Self.app])
    #expect(list.status == 0, "\(list)")
    #expect(Self.row(list.stdout, endingWith: " Documents/a.txt")?.hasPrefix("complete ") == true, "\(list)")
    #expect(list.stdout.contains("Library/Caches/") && !list.stdout.contains("Containers/"), "\(list)")
    let documents = try await run(["ls", "--json", "--bundle", Self.app, "Documents"])
    #expect(documents.status == 0 && documents.stdout.contains("\"path\" : \"a.txt\""), "\(documents)")
    // An absolute path inside the container goes with --bundle too.
    let absolute = try await run(["get-class", "--bundle", Self.app, t.containerPath(Self.app, "Documents")])
    #expect(absolute.status == 0, "\(absolute)")
    // audit --bundle audits the one container.
    let audit = try await run(["audit", "--bundle", Self.app, "--format", "json"])
    #expect(audit.status != 2 && audit.stdout.contains(Self.app), "\(audit)")
  }

  @Test func relativePathsFromInsideAContainerStillWorkAndBundleOverridesThem() async throws {
    let (t, _) = try setUp()
    let documents = t.containerPath(Self.app, "Documents")
    let inside = try await Protfs.run(
      ["--device", t.root, "set-class", "none", "a.txt"], currentDirectory: documents)
    #expect(inside.status == 0, "\(inside)")
    #expect(t.rawClass(documents + "/a.txt") == "NSFileProtectionNone")
    let up = try await Protfs.run(["--device", t.root, "get-class", "../tmp", "a.txt"], currentDirectory: documents)
    #expect(up.status == 0, "\(up)")
    #expect(Self.row(up.stdout, endingWith: "  a.txt")?.hasPrefix("NSFileProtectionNone ") == true, "\(up)")
    let listed = try await Protfs.run(["--device", t.root, "ls", "."], currentDirectory: documents)
    #expect(listed.status == 0 && listed.stdout.contains(" a.txt\n"), "\(listed)")
    let fromRoot = try await Protfs.run(
      ["--device", t.root, "get-class", "Containers/\(Self.app)/Documents/a.txt"], currentDirectory: t.root)
    #expect(fromRoot.status == 0, "\(fromRoot)")
    // With --bundle, the container it names is the base, wherever the command runs.
    let other = "com.example.other"
    try t.device.createContainer(try BundleID(other))
    let elsewhere = try await Protfs.run(
      ["--device", t.root, "set-class", "--bundle", other, "complete", "Documents"], currentDirectory: documents)
    #expect(elsewhere.status == 0, "\(elsewhere)")
    #expect(t.rawClass(t.containerPath(other, "Documents")) == "NSFileProtectionComplete")
    #expect(t.rawClass(documents) != "NSFileProtectionComplete")
  }

  @Test func theErrorOfARelativePathNamesItsBase() async throws {
    let (t, elsewhere) = try setUp()
    let outside = try await Protfs.run(
      ["--device", t.root, "set-class", "complete", "Documents/a.txt"], currentDirectory: elsewhere)
    #expect(outside.status == 1, "\(outside)")
    #expect(
      outside.stderr.contains(
        "'Documents/a.txt' is relative to the current directory '\(elsewhere)', which is outside the device '\(t.root)'"
      ),
      "\(outside)")
    #expect(outside.stderr.contains("give --bundle \(Self.app) to name a path in that app's container"), "\(outside)")
    // From the device root, Documents/a.txt is nothing: the error says where it looked.
    let root = try await Protfs.run(["--device", t.root, "get-class", "Documents/a.txt"], currentDirectory: t.root)
    #expect(root.status == 1, "\(root)")
    #expect(
      root.stderr.contains("There is no 'Documents/a.txt' in the current directory '\(t.root)'")
        && root.stderr.contains("--bundle \(Self.app)"), "\(root)")
    // A path from the device root, given elsewhere: the absolute path that works.
    let containers = try await Protfs.run(
      ["--device", t.root, "ls", "-R", "Containers/\(Self.app)"], currentDirectory: elsewhere)
    #expect(containers.status == 1, "\(containers)")
    #expect(containers.stderr.contains("'\(t.root)/Containers/\(Self.app)'"), "\(containers)")
    #expect(t.rawClass(t.containerPath(Self.app, "Documents/a.txt")) == nil)
  }

  @Test func hostileBundlesAndPathsNeverLeaveTheContainer() async throws {
    let (t, elsewhere) = try setUp()
    try FileManager.default.createDirectory(
      atPath: t.containerPath(Self.app, "Documents/sub"), withIntermediateDirectories: false)
    let other = "com.example.other"
    try t.device.createContainer(try BundleID(other))
    let victim = t.containerPath(other, "Documents/b.txt")
    try t.writeFile(victim)
    let secret = elsewhere + "/secret.txt"
    try t.writeFile(secret)
    func run(_ arguments: [String]) async throws -> RunResult {
      try await Protfs.run(["--device", t.root] + arguments, currentDirectory: elsewhere)
    }
    // A bundle id is one name, never a path.
    for bundle in ["../x", "/etc", "\(Self.app)/../\(other)", "..", "."] {
      let result = try await run(["set-class", "--bundle", bundle, "complete", "Documents/a.txt"])
      #expect(result.status == 64 && result.stderr.contains("is not a valid bundle identifier"), "\(bundle): \(result)")
    }
    // Paths that leave the container are refused, and the error names them.
    for path in ["../\(other)/Documents/b.txt", "Documents/../../\(other)/Documents/b.txt", victim, secret] {
      let result = try await run(["set-class", "--bundle", Self.app, "complete", path])
      #expect(result.status == 1, "\(path): \(result)")
      #expect(
        result.stderr.contains("The path '\(path)' is outside the container of \(Self.app)"), "\(path): \(result)")
    }
    // A symbolic link is never followed out of the container: not by a path, nor with --follow.
    let documents = t.containerPath(Self.app, "Documents")
    try FileManager.default.createSymbolicLink(atPath: documents + "/out", withDestinationPath: "/etc")
    try FileManager.default.createSymbolicLink(atPath: documents + "/next", withDestinationPath: victim)
    let through = try await run(["set-class", "--bundle", Self.app, "complete", "Documents/out/passwd"])
    #expect(through.status == 1 && through.stderr.contains("symbolic link"), "\(through)")
    let followed = try await run(["set-class", "-L", "--bundle", Self.app, "complete", "Documents/next"])
    #expect(followed.status == 1, "\(followed)")
    #expect(followed.stderr.contains("outside the container of \(Self.app)"), "\(followed)")
    // A container that is a symbolic link (to a directory outside the device) is no container.
    let evil = "com.example.evil"
    try FileManager.default.createSymbolicLink(atPath: t.containerPath(evil), withDestinationPath: elsewhere)
    let linked = try await run(["set-class", "--bundle", evil, "complete", "secret.txt"])
    #expect(linked.status == 1, "\(linked)")
    #expect(linked.stderr.contains("'\(t.containerPath(evil))' is a symbolic link, not a container"), "\(linked)")
    let listed = try await run(["ls", "--bundle", evil])
    #expect(listed.status == 1 && listed.stdout.isEmpty, "\(listed)")
    // Creating it refuses too (it used to retry forever): `timeout` ends a run that hangs.
    let created = try await Protfs.runProgram(
      "/usr/bin/timeout", ["30", Protfs.binary, "--device", t.root, "init", evil])
    #expect(created.status == 1 && created.stderr.contains("not a container"), "\(created)")
    for path in [victim, secret, "/etc/passwd"] {
      #expect(TestDevice.rawAttribute(path, AttributeName.protectionClass) == nil, "\(path)")
    }
  }

  @Test func suggestedCommandsKeepTheDevice() async throws {
    let t = try TestDevice(containers: [Self.app])
    // With --device, or PROTFS_DEVICE naming another device than the default: the device goes in.
    let explicit = try await Protfs.run(["--device", t.root, "app", "status", "com.example.new"])
    #expect(explicit.status == 1, "\(explicit)")
    #expect(explicit.stderr.contains("`protfs --device \(t.root) init com.example.new`"), "\(explicit)")
    let environment = try await Protfs.run(["tasks", "cancel", "99"], environment: ["PROTFS_DEVICE": t.root])
    #expect(environment.status == 1, "\(environment)")
    #expect(environment.stderr.contains("`protfs --device \(t.root) tasks`"), "\(environment)")
    // A device whose path the shell would split is quoted.
    let spaced = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(spaced) }
    let unusual = spaced + "/my device"
    let uninitialised = try await Protfs.run(["--device", unusual, "ls", "--bundle", Self.app])
    #expect(uninitialised.stderr.contains("`protfs --device '\(unusual)' init \(Self.app)`"), "\(uninitialised)")
    // The default device needs no --device.
    let home = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(home) }
    #expect(try await Protfs.run(["init", Self.app], environment: ["XDG_DATA_HOME": home]).status == 0)
    let bare = try await Protfs.run(["app", "status", "com.example.new"], environment: ["XDG_DATA_HOME": home])
    #expect(bare.status == 1 && bare.stderr.contains("`protfs init com.example.new`"), "\(bare)")
  }

  /// Every command that takes a bundle id of an existing app, with a misspelt one.
  static let misspelt: [([String], Int32)] = [
    (["app", "status", "com.exmaple.app"], 1),
    (["app", "launch", "com.exmaple.app", "--", "/bin/true"], 1),
    (["app", "terminate", "com.exmaple.app"], 1),
    (["cache", "ls", "com.exmaple.app"], 1),
    (["cache", "purge", "com.example.ap", "--orphans"], 1),
    (["get-class", "--bundle", "com.exmaple.app", "Documents"], 1),
    (["set-class", "--bundle", "com.Example.App", "none", "Documents"], 1),
    (["ls", "--bundle", "example.app"], 1),
    (["audit", "--bundle", "com.exmaple.app"], 2),
    (["download", "--bundle", "com.exmaple.app", "http://127.0.0.1:9/a"], 1),
    (["upload", "--bundle", "com.exmaple.app", "--from", "Documents/a", "http://127.0.0.1:9/a"], 1),
  ]

  @Test(arguments: misspelt)
  func anUnknownBundleIDSaysWhichWasMeant(arguments: [String], status: Int32) async throws {
    let t = try TestDevice(containers: [Self.app, "org.unrelated.tool"])
    let result = try await Protfs.run(["--device", t.root] + arguments)
    #expect(result.status == status, "\(result)")
    #expect(
      result.stderr.contains("has no container on the device '\(t.root)'. Did you mean \(Self.app)?"), "\(result)")
    let containers = try FileManager.default.contentsOfDirectory(atPath: t.path("Containers")).sorted()
    #expect(containers == [Self.app, "org.unrelated.tool"], "nothing was created")
  }

  @Test func withoutANearMissTheFewContainersAreListed() async throws {
    let t = try TestDevice(containers: [Self.app, "org.unrelated.tool"])
    let result = try await Protfs.run(["--device", t.root, "app", "status", "net.other.thing"])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("whose containers are \(Self.app) and org.unrelated.tool"), "\(result)")
    // init and init-cache create what they are given, and point out the near miss.
    let cache = try await Protfs.run(["--device", t.root, "init-cache", "com.exmaple.app"])
    #expect(cache.status == 0, "\(cache)")
    #expect(cache.stderr.contains("note: the device also has the container \(Self.app); did you mean that app?"))
  }
}
