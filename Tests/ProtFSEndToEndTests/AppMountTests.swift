import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs app launch` runs the app through a mount served for it (docs/semantics.md §8): the
/// class decides as on a phone, every refusal is EPERM, and the mount ends with the app.
@Suite(.serialized, .timeLimit(.minutes(2))) struct AppMountTests {
  /// The app: reads its complete file, makes a class-none temp file, waits for the test to lock
  /// the device (the file `go` beside the script), then tries again.
  static func script(_ d: AppDevice) -> String {
    """
    #!/bin/sh
    cd "$HOME" || exit 1
    cat Documents/secret.txt
    echo "mounts $(grep -c " - fuse.protfs " /proc/self/mountinfo)"
    echo staged > tmp/upload.part
    echo ready
    while [ ! -e "\(d.scripts)/go" ]; do sleep 0.05; done
    cat Documents/secret.txt 2>&1 | sed 's/^/read: /'
    (echo new > Documents/new.txt) 2>&1 | sed 's/^/create: /'
    mv tmp/upload.part Documents/upload.part && echo "moved"
    cat Documents/upload.part
    echo done
    while read -r line <&3; do :; done
    """
  }

  static func prepare(_ d: AppDevice) async throws {
    let container = d.t.containerPath(AppDevice.bundle)
    try d.t.writeFile(container + "/Documents/secret.txt", "secret\n")
    try FileManager.default.createDirectory(atPath: container + "/tmp", withIntermediateDirectories: true)
    _ = chown(container + "/tmp", 501, 501)
    for (protection, path) in [("complete", "Documents"), ("complete", "Documents/secret.txt"), ("none", "tmp")] {
      let set = try await d.protfs(["set-class", protection, container + "/" + path])
      #expect(set.status == 0, "\(set)")
    }
  }

  @Test func theClassDecidesThroughTheAppsMountAndEveryRefusalIsEPERM() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    try await Self.prepare(d)
    let app = try d.launch([], [try d.script("mounted.sh", Self.script(d))])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(app.output.contains("secret"), "\(app.output)")
    #expect(app.output.contains("mounts 1"), "\(app.output)")
    let mountpoint = d.root + "/.protfs/app-mounts/" + AppDevice.bundle
    #expect(MountRegistry.protfsMountpoints().contains(mountpoint))
    // `lock` returns once every mount of the device, the app's included, enforces the lock.
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    _ = FileManager.default.createFile(atPath: d.scripts + "/go", contents: nil)
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    let output = app.output
    #expect(output.contains { $0.hasPrefix("read: ") && $0.contains("Operation not permitted") }, "\(output)")
    #expect(output.contains { $0.hasPrefix("create: ") && $0.contains("Operation not permitted") }, "\(output)")
    // The locked move of a class-none file into complete Documents works, and it keeps its class.
    #expect(output.contains("moved") && output.contains("staged"), "\(output)")
    let moved = d.t.containerPath(AppDevice.bundle, "Documents/upload.part")
    let shown = try await d.protfs(["get-class", moved])
    #expect(shown.stdout.hasPrefix("NSFileProtectionNone  own "), "\(shown)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
    // The mount ended with the app.
    #expect(!MountRegistry.protfsMountpoints().contains(mountpoint))
    #expect(MountRegistry(device: d.t.device).active().isEmpty)
  }

  @Test func withoutTheMountThePermissionModesRefuseWithEACCES() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    try await Self.prepare(d)
    let app = try d.launch(["--no-mount"], [try d.script("unmounted.sh", Self.script(d))])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(app.output.contains("mounts 0"), "\(app.output)")
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    _ = FileManager.default.createFile(atPath: d.scripts + "/go", contents: nil)
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    #expect(app.output.contains { $0.hasPrefix("read: ") && $0.contains("Permission denied") }, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  @Test func aKilledSupervisorsMountGoesWithIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let app = try d.launch([], [try d.script("idle.sh", "#!/bin/sh\necho ready\nwhile read -r line <&3; do :; done\n")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    let mountpoint = d.root + "/.protfs/app-mounts/" + AppDevice.bundle
    #expect(MountRegistry.protfsMountpoints().contains(mountpoint))
    let supervisor = try #require(d.record()["supervisorPID"] as? Int)
    #expect(supervisor == Int(app.process.processIdentifier), "\(d.record())")
    #expect(kill(pid_t(supervisor), SIGKILL) == 0)
    _ = await app.exit()
    // fusermount3 unmounts once the supervisor's connection closes.
    let gone = await offPool { () -> Bool in
      let deadline = Date() + 30
      while Date() < deadline {
        if !MountRegistry.protfsMountpoints().contains(mountpoint) { return true }
        usleep(20_000)
      }
      return false
    }
    // fusermount3 nearly always unmounts within a second. On a loaded machine it was seen twice in
    // six runs of the whole suite not to within 30 s (why is not known yet): then the app's next
    // launch detaches the dead mount before it serves its own, and that one leaves none.
    if !gone {
      let holders = Self.fuseHolders()
      let again = try d.launch(
        [], [try d.script("again.sh", "#!/bin/sh\necho again\nwhile read -r line <&3; do :; done\n")])
      defer { again.stop() }
      #expect(await again.line(containing: "again") != nil, "\(again.output)")
      #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
      _ = await again.exit()
      let left = MountRegistry.protfsMountpoints().contains(mountpoint)
      #expect(!left, "still mounted after the next launch; processes holding /dev/fuse: \(holders)")
    }
  }

  @Test func aDeadMountLeftByAKilledSupervisorIsDetachedByTheAppsNextLaunch() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let idle = "#!/bin/sh\necho ready\nwhile read -r line <&3; do :; done\n"
    let app = try d.launch([], [try d.script("idle.sh", idle)])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    let mountpoint = d.root + "/.protfs/app-mounts/" + AppDevice.bundle
    // fusermount3's auto_unmount helper dies first, then the supervisor: nothing is left to
    // unmount, and the dead mount answers every look at the mountpoint with ENOTCONN.
    let helpers = Self.processes(where: { $0.hasPrefix("fusermount3") && $0.contains(mountpoint) })
    #expect(!helpers.isEmpty)
    for pid in helpers { kill(pid, SIGKILL) }
    let supervisor = try #require(d.record()["supervisorPID"] as? Int)
    #expect(kill(pid_t(supervisor), SIGKILL) == 0)
    _ = await app.exit()
    d.endApp()
    // Opening asks the mount (a stat may be answered from the kernel's cache).
    let answers = { () -> Int32 in
      let fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      if fd < 0 { return errno }
      close(fd)
      return 0
    }
    #expect(answers() == ENOTCONN)
    // A stat of the mountpoint is answered from the kernel's cache for the mount's 10 s attribute
    // timeout; once that expires it meets ENOTCONN too, as the next launch's look at it does.
    let expired = await offPool { () -> Bool in
      let deadline = Date() + 20
      var status = stat()
      while Date() < deadline {
        if stat(mountpoint, &status) == -1 && errno == ENOTCONN { return true }
        usleep(100_000)
      }
      return false
    }
    #expect(expired)
    let again = try d.launch([], [try d.script("again.sh", idle.replacingOccurrences(of: "ready", with: "again"))])
    defer { again.stop() }
    #expect(await again.line(containing: "again") != nil, "\(again.output)")
    let answer = answers()
    #expect(answer == 0, "the mountpoint answers \(String(cString: strerror(answer)))")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await again.exit()
    #expect(!MountRegistry.protfsMountpoints().contains(mountpoint))
  }

  /// The pids of the processes whose command line (arguments joined by spaces) satisfies `test`.
  static func processes(where test: (String) -> Bool) -> [pid_t] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { name -> pid_t? in
      guard let pid = pid_t(name), let data = FileManager.default.contents(atPath: "/proc/\(name)/cmdline") else {
        return nil
      }
      return test(String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)) ? pid : nil
    }
  }

  /// The processes that hold /dev/fuse open, with their command lines: who keeps a mount alive.
  static func fuseHolders() -> [String] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { pid -> String? in
      guard Int(pid) != nil,
        let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"),
        fds.contains(where: {
          (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == "/dev/fuse"
        })
      else { return nil }
      let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline").map {
        String(decoding: $0.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
      }
      let state =
        (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))?.split(separator: ")").last?
        .split(separator: " ").first ?? "?"
      let stack = (try? String(contentsOfFile: "/proc/\(pid)/stack", encoding: .utf8)) ?? ""
      return "\(pid) [\(state)]: \(command ?? "?") \(stack.split(separator: "\n").prefix(6).joined(separator: " | "))"
    }
  }
}
