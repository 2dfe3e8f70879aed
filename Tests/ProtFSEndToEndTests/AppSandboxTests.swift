import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// Each app is kept to its own container and its own processes, as iOS's sandbox keeps it
/// (docs/semantics.md §10, §11): every app runs as the app user (uid 501), so each test is an
/// attack one app makes on a neighbour that permission bits alone would let through.
@Suite(.serialized, .timeLimit(.minutes(3))) struct AppSandboxTests {
  static let neighbour = "com.example.neighbour"

  /// How the apps reach the device: through a mount served for the app (where FUSE is), under
  /// permission modes alone (`--no-mount`), or through the device's own mount (`protfs mount`).
  enum Route: String, CaseIterable, Sendable {
    case appMount, permissionModes, deviceMount
  }

  /// The neighbour's secret: class none, so that only the sandbox can keep it.
  private static func plantSecret(_ d: AppDevice) throws -> String {
    let documents = d.t.containerPath(neighbour, "Documents")
    try d.t.writeFile(documents + "/secret.txt", "the neighbour's secret\n")
    chown(documents + "/secret.txt", 501, 501)
    try d.t.device.setClass(.none, of: try d.t.device.resolve(documents + "/secret.txt"))
    return documents
  }

  @Test(arguments: Route.allCases) func anAppReachesNoOtherAppsContainer(_ route: Route) async throws {
    let d = try AppDevice(neighbours: [Self.neighbour])
    defer { d.remove() }
    defer { d.endApp() }
    let documents = try Self.plantSecret(d)
    let neighbourContainer = d.t.containerPath(Self.neighbour)
    // The neighbour's bundle, readable by all as an installed one is (root's, 0755 and 0644).
    let neighbourBundle = d.root + "/Bundles/\(Self.neighbour).app"
    try FileManager.default.createDirectory(atPath: neighbourBundle, withIntermediateDirectories: true)
    try d.t.writeFile(neighbourBundle + "/Info.plist", "the neighbour's bundle\n")
    chmod(d.root + "/Bundles", 0o755)
    chmod(neighbourBundle, 0o755)
    chmod(neighbourBundle + "/Info.plist", 0o644)
    var mountpoint = ""
    if route == .deviceMount {
      // A space and a backslash, which the mount table writes as octal escapes.
      mountpoint = d.t.directory + "/the mount\\point"
      mkdir(mountpoint, 0o755)
      let mounted = try await d.protfs(["mount", mountpoint])
      #expect(mounted.status == 0, "\(mounted)")
    }
    defer { if route == .deviceMount { _ = try? Protfs.runBlocking(["--device", d.root, "unmount", mountpoint]) } }
    let script = try d.script(
      "neighbourly.sh",
      """
      #!/bin/sh
      cat '\(neighbourContainer)/Documents/secret.txt' 2>&1 | sed 's/^/read: /'
      (echo planted > '\(neighbourContainer)/Documents/planted.txt') 2>&1 | sed 's/^/write: /'
      (cd '\(neighbourContainer)' && echo "entered: $(pwd)") 2>&1 | sed 's/^/cd: /'
      echo "listed: $(ls "$PROTFS_DEVICE/Containers" | tr '\\n' ' ')"
      cat '\(neighbourBundle)/Info.plist' 2>&1 | sed 's/^/bundle: /'
      echo "bundles: $(ls "$PROTFS_DEVICE/Bundles" | tr '\\n' ' ')."
      if [ -n "\(mountpoint)" ]; then
        cat '\(mountpoint)/\(Self.neighbour)/Documents/secret.txt' 2>&1 | sed 's/^/through the mount: /'
      fi
      echo mine > "$HOME/Documents/mine.txt" && echo "own: written"
      echo done
      """)
    let app = try d.launch(route == .permissionModes ? ["--no-mount"] : [], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    let output = app.output
    #expect(!output.contains { $0.contains("the neighbour's secret") }, "\(output)")
    #expect(output.contains { $0.hasPrefix("read: ") && $0.contains("No such file or directory") }, "\(output)")
    #expect(output.contains { $0.hasPrefix("write: ") }, "\(output)")
    #expect(output.contains { $0.hasPrefix("cd: ") && !$0.contains("entered") }, "\(output)")
    #expect(output.contains("listed: \(AppDevice.bundle) "), "\(output)")
    #expect(!output.contains { $0.contains("the neighbour's bundle") }, "\(output)")
    #expect(output.contains { $0.hasPrefix("bundle: ") && $0.contains("No such file or directory") }, "\(output)")
    #expect(output.contains("bundles: \(AppDevice.bundle).app ."), "\(output)")
    if route == .deviceMount {
      #expect(
        output.contains { $0.hasPrefix("through the mount: ") && $0.contains("No such file or directory") },
        "\(output)")
    }
    #expect(output.contains("own: written"), "\(output)")
    #expect(!FileManager.default.fileExists(atPath: documents + "/planted.txt"))
    #expect(FileManager.default.contents(atPath: d.t.containerPath(AppDevice.bundle, "Documents/mine.txt")) != nil)
    _ = await app.exit()
  }

  /// A mount made after the app started (the device's own, here, beneath a shared mount) does not
  /// reach into the app's sandbox: its mount namespace takes nothing more from the system's, so
  /// the neighbour's container stays out of reach and the app's mounts stay what they were.
  @Test(arguments: [Route.appMount, .permissionModes])
  func aMountMadeAfterTheLaunchDoesNotReachTheApp(_ route: Route) async throws {
    let d = try AppDevice(neighbours: [Self.neighbour])
    defer { d.remove() }
    defer { d.endApp() }
    _ = try Self.plantSecret(d)
    // A shared mount around the mountpoint, as systemd makes `/`: what is mounted beneath it
    // later propagates to every namespace that takes mounts from this one.
    let shared = d.t.directory + "/shared"
    let mountpoint = shared + "/mnt"
    mkdir(shared, 0o755)
    #expect(mount(shared, shared, nil, UInt(MS_BIND), nil) == 0, "errno \(errno)")
    defer { umount2(shared, Int32(MNT_DETACH)) }
    #expect(mount(nil, shared, nil, UInt(MS_SHARED), nil) == 0, "errno \(errno)")
    mkdir(mountpoint, 0o755)
    let script = try d.script(
      "later.sh",
      """
      #!/bin/sh
      echo "mounts $(grep -c " - fuse.protfs " /proc/self/mountinfo)"
      echo ready
      while [ ! -e "\(d.scripts)/go" ]; do sleep 0.05; done
      cat '\(mountpoint)/\(Self.neighbour)/Documents/secret.txt' 2>&1 | sed 's/^/through the mount: /'
      echo "mounts now $(grep -c " - fuse.protfs " /proc/self/mountinfo)"
      echo done
      """)
    let app = try d.launch(route == .permissionModes ? ["--no-mount"] : [], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    let mounted = try await d.protfs(["mount", mountpoint])
    #expect(mounted.status == 0, "\(mounted)")
    defer { _ = try? Protfs.runBlocking(["--device", d.root, "unmount", mountpoint]) }
    _ = FileManager.default.createFile(atPath: d.scripts + "/go", contents: nil)
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    let output = app.output
    let before = try #require(output.first { $0.hasPrefix("mounts ") && !$0.hasPrefix("mounts now") })
    #expect(before == (route == .appMount ? "mounts 1" : "mounts 0"), "\(output)")
    #expect(output.contains("mounts now \(before.dropFirst(7))"), "\(output)")
    #expect(!output.contains { $0.contains("the neighbour's secret") }, "\(output)")
    #expect(
      output.contains { $0.hasPrefix("through the mount: ") && $0.contains("No such file or directory") },
      "\(output)")
    _ = await app.exit()
  }

  /// Launched from inside the neighbour's container, the app does not keep that directory (which
  /// the sandbox no longer names) as its working directory: it starts in its own container.
  @Test func anAppLaunchedFromAnotherAppsContainerStartsInItsOwn() async throws {
    let d = try AppDevice(neighbours: [Self.neighbour])
    defer { d.remove() }
    defer { d.endApp() }
    _ = try Self.plantSecret(d)
    let script = try d.script(
      "where.sh",
      """
      #!/bin/sh
      echo "cwd: $(pwd)"
      cat Documents/secret.txt 2>&1 | sed 's/^/read: /'
      echo "listed: $(ls | tr '\\n' ' ')"
      echo done
      """)
    let app = try d.launch([], [script], directory: d.t.containerPath(Self.neighbour))
    defer { app.stop() }
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    #expect(app.output.contains("cwd: \(d.t.containerPath(AppDevice.bundle))"), "\(app.output)")
    #expect(!app.output.contains { $0.contains("the neighbour's secret") }, "\(app.output)")
    _ = await app.exit()
  }

  /// An app launched from root's working directory, below a directory closed to the app user,
  /// starts in its own container: it neither reads nor lists where root stood (an `.env` there).
  @Test func anAppStartsInItsOwnContainerNotInRootsDirectory() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let closed = d.scripts + "/closed"
    let work = closed + "/work"
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    chmod(closed, 0o700)
    chmod(work, 0o755)
    try "ROOT-SECRET\n".write(toFile: work + "/.env", atomically: false, encoding: .utf8)
    chmod(work + "/.env", 0o644)
    let script = try d.script(
      "cwd.sh",
      """
      #!/bin/sh
      echo "cwd: $(pwd)"
      cat ./.env 2>&1 | sed 's/^/read: /'
      echo done
      """)
    let app = try d.launch([], [script], directory: work)
    defer { app.stop() }
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    #expect(app.output.contains("cwd: \(d.t.containerPath(AppDevice.bundle))"), "\(app.output)")
    #expect(!app.output.contains { $0.contains("ROOT-SECRET") }, "\(app.output)")
    _ = await app.exit()
  }

  /// The neighbour's processes run as the same user, which the kernel would otherwise let the app
  /// trace, inspect through /proc and signal: its Landlock domain refuses each.
  @Test func anAppReachesNoOtherAppsProcesses() async throws {
    let d = try AppDevice(neighbours: [Self.neighbour])
    defer { d.remove() }
    defer { d.endApp() }
    let neighbour = try d.launch(
      [], ["/bin/sh", "-c", "echo \"pid $$\"; while :; do sleep 0.05; done"], bundle: Self.neighbour)
    defer { neighbour.stop() }
    let said = try #require(await neighbour.line(containing: "pid "), "\(neighbour.output)")
    let pid = try #require(Int32(said.0.dropFirst(4)), "\(said.0)")
    let script = try d.script(
      "prying.sh",
      """
      #!/bin/sh
      ls "/proc/$NEIGHBOUR/root$HOME/.." 2>&1 | sed 's/^/root: /'
      cat "/proc/$NEIGHBOUR/environ" 2>&1 | tr '\\0' ' ' | sed 's/^/environ: /'
      readlink -v "/proc/$NEIGHBOUR/fd/1" 2>&1 | sed 's/^/fd: /'
      readlink -v "/proc/$NEIGHBOUR/cwd" 2>&1 | sed 's/^/cwd: /'
      kill -STOP "$NEIGHBOUR" 2>&1 | sed 's/^/stop: /'
      kill -KILL "$NEIGHBOUR" 2>&1 | sed 's/^/kill: /'
      sleep 30 & child=$!
      kill "$child" && wait "$child"; echo "own child: $?"
      echo done
      """)
    let app = try d.launch([], [script], environment: ["NEIGHBOUR": String(pid)])
    defer { app.stop() }
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    let output = app.output
    for (prefix, refusal) in [
      ("root: ", "Permission denied"), ("environ: ", "Permission denied"), ("fd: ", "Permission denied"),
      ("cwd: ", "Permission denied"),
      ("stop: ", "Operation not permitted"), ("kill: ", "Operation not permitted"),
    ] {
      #expect(output.contains { $0.hasPrefix(prefix) && $0.contains(refusal) }, "\(prefix) \(output)")
    }
    // Its own processes it still signals (143: its child ended by SIGTERM).
    #expect(output.contains("own child: 143"), "\(output)")
    // The neighbour runs on, neither stopped nor killed.
    #expect(MountedDevice.isRunning(pid))
    let state = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    #expect(state.split(separator: ")").last?.split(separator: " ").first != "T", "\(state)")
    _ = await app.exit()
  }
}
