import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// The daemon against clients that misbehave, and the backing tree while mounted.
@Suite(.serialized) struct MountRobustnessTests {
  @Test func theDaemonOutlivesClientsThatHangOrDie() async throws {
    let big = String(repeating: "0123456789abcdef", count: 1 << 16)
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/big.bin", .completeUntilFirstUserAuthentication, big)
      try MountedDevice.file(t, "Documents/small.txt", .complete, "small\n")
    }
    let daemon = MountRegistry(device: m.t.device).records()[0].pid
    // One client stopped while it holds a file open...
    let hung = try Conversation.holding("\(m.documents)/small.txt")
    #expect(await hung.line() == "opened")
    #expect(kill(hung.process.processIdentifier, SIGSTOP) == 0)
    // ...and one killed in the middle of reading, over and over, through the daemon (direct I/O).
    let script = """
      import os, sys
      fd = os.open(sys.argv[1], os.O_RDONLY)
      print("reading", flush=True)
      while True:
          os.lseek(fd, 0, 0)
          while os.read(fd, 65536):
              pass
      """
    let reader = try Conversation("/usr/bin/python3", ["-c", script, "\(m.documents)/big.bin"])
    #expect(await reader.line() == "reading")
    #expect(kill(reader.process.processIdentifier, SIGKILL) == 0)
    await offPool { reader.process.waitUntilExit() }
    // The daemon still serves everyone, and state changes still reach it.
    #expect(MountedDevice.isRunning(daemon))
    #expect(try await m.sh("cat '\(m.documents)/big.bin'").stdout == big)
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(try await m.sh("cat '\(m.documents)/small.txt'").stderr.contains("Operation not permitted"))
    #expect(try await m.protfs(["unlock"]).status == 0)
    // The stopped client goes on where it was.
    #expect(kill(hung.process.processIdentifier, SIGCONT) == 0)
    #expect(await hung.ask("read") == "ok small")
    #expect(MountedDevice.isRunning(daemon))
  }

  @Test func theBackingTreeStaysProtectedFromOtherUsersWhileMounted() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/secret.txt", .complete, "secret\n")
      chmod(t.root, 0o755)
      chmod(t.root + "/Containers", 0o755)
    }
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let direct = try await m.sh("cat '\(m.backingDocuments)/secret.txt'", as: 65534)
    #expect(direct.status != 0 && direct.stderr.contains("Permission denied"), "\(direct)")
    let mounted = try await m.sh("cat '\(m.documents)/secret.txt'", as: 65534)
    #expect(mounted.status != 0 && mounted.stderr.contains("Operation not permitted"), "\(mounted)")
    #expect(try await m.protfs(["unlock"]).status == 0)
    let after = try await m.sh("cat '\(m.documents)/secret.txt'", as: 65534)
    #expect(after.stdout == "secret\n", "\(after)")
  }

  @Test func withoutDevFuseMountingIsOneClearErrorAndTheRestWorks() async throws {
    let t = try TestDevice(containers: [MountedDevice.bundle])
    let mountpoint = t.directory + "/mnt"
    mkdir(mountpoint, 0o755)
    // In a mount namespace of its own whose /dev has no fuse device.
    let script = "mount -t tmpfs none /dev && exec '\(Protfs.binary)' --device '\(t.root)' mount '\(mountpoint)'"
    let result = try await Protfs.runProgram("/usr/bin/unshare", ["-m", "/bin/sh", "-c", script])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("FUSE is not available") && result.stderr.contains("/dev/fuse"), "\(result)")
    #expect(result.stderr.split(separator: "\n").count == 1, "one error: \(result)")
    #expect(!MountRegistry.protfsMountpoints().contains(mountpoint))
    #expect(MountRegistry(device: t.device).records().isEmpty)
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    #expect(try await Protfs.run(["--device", t.root, "status"]).status == 0)
  }
}
