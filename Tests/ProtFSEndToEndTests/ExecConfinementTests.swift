import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs exec` as root: the program runs as the app user, meets the lock, and can neither undo it
/// nor learn the passcode.
@Suite(.serialized) struct ExecConfinementTests {
  static let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]

  /// Runs `sh -c script` under `protfs exec`.
  func confined(_ d: LockDevice, _ script: String, options: [String] = [], environment: [String: String] = [:])
    async
    throws -> RunResult
  {
    try await d.protfs(["exec"] + options + ["--", "sh", "-c", script], environment: environment)
  }

  /// `/proc/self/status` of a program run under exec, by field.
  func status(_ d: LockDevice) async throws -> [String: String] {
    let result = try await confined(d, "cat /proc/self/status")
    #expect(result.status == 0, "\(result)")
    var fields: [String: String] = [:]
    for line in result.stdout.split(separator: "\n") {
      let parts = line.split(separator: ":", maxSplits: 1)
      if parts.count == 2 { fields[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces) }
    }
    return fields
  }

  @Test func aProgramSomeoneHoldsOpenForWritingForAMomentStillRuns() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script("busy.sh", "#!/bin/sh\necho ran\n")
    // Held open for writing, as a fork made while another thread wrote it holds it until its exec:
    // exec(2) fails with ETXTBSY meanwhile.
    let writer = open(script, O_WRONLY | O_CLOEXEC)
    #expect(writer >= 0)
    let run = Task { try await d.protfs(["exec", "--", script]) }
    // The forked child waits between its tries (in nanosleep): then the writer lets go. It has
    // protfs's command line (it is a fork of it); protfs itself waits in a read of the child's
    // report. The writer is closed on the thread that saw the wait: resuming on the cooperative
    // pool first could take longer than the child's tries while other tests hold its threads.
    let commandLine = Data("\(d.root)\u{0}exec\u{0}--\u{0}\(script)".utf8)
    let waiting = await offPool { () -> Bool in
      defer { close(writer) }
      let deadline = Date() + 20
      while Date() < deadline {
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int32(entry) != nil {
          guard let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
            cmdline.range(of: commandLine) != nil
          else { continue }
          let wchan = FileManager.default.contents(atPath: "/proc/\(entry)/wchan") ?? Data()
          if String(decoding: wchan, as: UTF8.self).contains("nanosleep") { return true }
        }
        usleep(2_000)
      }
      return false
    }
    let result = try await run.value
    #expect(waiting, "the child never waited to try again: \(result)")
    #expect(result.status == 0 && result.stdout == "ran\n", "\(result)")
  }

  /// The program is found as execvp finds it, by the app user: a file in PATH the app user may not
  /// execute is passed over, a file without `#!` runs as a shell script, and a name found nowhere
  /// is status 127.
  @Test func theProgramIsSearchedForAsTheAppUserAsExecvpDoes() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let hidden = d.scripts + "/hidden", visible = d.scripts + "/visible"
    for directory in [hidden, visible] { mkdir(directory, 0o755) }
    try "#!/bin/sh\necho from hidden\n".write(toFile: hidden + "/tool", atomically: true, encoding: .utf8)
    chmod(hidden + "/tool", 0o700)  // root's: the app user may not execute it
    try "echo from visible as $(id -u)\n".write(toFile: visible + "/tool", atomically: true, encoding: .utf8)
    chmod(visible + "/tool", 0o755)
    let path = "\(hidden):\(visible):/usr/bin:/bin"
    let found = try await d.protfs(["exec", "--", "tool"], environment: ["PATH": path])
    #expect(found.status == 0 && found.stdout == "from visible as 501\n", "\(found)")
    let denied = try await d.protfs(["exec", "--", "tool"], environment: ["PATH": hidden])
    #expect(
      denied.status == 126 && denied.stderr.contains("protfs: exec: tool: Permission denied")
        && denied.stderr.contains("'\(hidden)/tool'"), "\(denied)")
    let missing = try await d.protfs(["exec", "--", "no-such-tool"], environment: ["PATH": path])
    #expect(missing.status == 127 && missing.stderr.contains("no-such-tool: command not found"), "\(missing)")
  }

  /// A directory of PATH closed to the app user (root's own, 0700) is passed over as a shell run
  /// by that user passes it over: a program found nowhere else is "command not found" (127), with
  /// the directories skipped named, never "Permission denied"; one in a later directory runs, for
  /// `app launch` too; a file found that the app user may not execute is 126, naming it (issue 64).
  @Test func aDirectoryOfPathClosedToTheAppUserIsSkippedAndNamed() async throws {
    let d = try AppDevice()
    defer {
      d.endApp()
      d.remove()
    }
    let closed = d.scripts + "/closed", open = d.scripts + "/open"
    mkdir(closed, 0o700)
    mkdir(open, 0o755)
    for directory in [closed, open] {
      let name = (directory as NSString).lastPathComponent
      try "#!/bin/sh\necho from \(name) as $(id -u)\n".write(
        toFile: directory + "/tool", atomically: true, encoding: .utf8)
      chmod(directory + "/tool", 0o755)
    }
    try "#!/bin/sh\necho plain\n".write(toFile: open + "/plain", atomically: true, encoding: .utf8)
    chmod(open + "/plain", 0o644)
    let missing = try await d.protfs(["exec", "--", "no-such-tool"], environment: ["PATH": "\(closed):/usr/bin:/bin"])
    #expect(missing.status == 127, "\(missing)")
    #expect(missing.stderr.contains("protfs: exec: no-such-tool: command not found\n"), "\(missing)")
    #expect(
      missing.stderr.contains("skipped the PATH directories uid 501 cannot search: \(closed);")
        && !missing.stderr.contains("Permission denied"), "\(missing)")
    let onlyClosed = try await d.protfs(["exec", "--", "tool"], environment: ["PATH": closed])
    #expect(onlyClosed.status == 127 && onlyClosed.stderr.contains("tool: command not found"), "\(onlyClosed)")
    let path = "\(closed):\(open):/usr/bin:/bin"
    let found = try await d.protfs(["exec", "--", "tool"], environment: ["PATH": path])
    #expect(found.status == 0 && found.stdout == "from open as 501\n", "\(found)")
    let launched = try await d.protfs(
      ["app", "launch", AppDevice.bundle, "--wait", "--", "tool"], environment: ["PATH": path])
    #expect(launched.status == 0 && launched.stdout.contains("from open as 501"), "\(launched)")
    let plain = try await d.protfs(["exec", "--", "plain"], environment: ["PATH": path])
    #expect(
      plain.status == 126 && plain.stderr.contains("protfs: exec: plain: Permission denied")
        && plain.stderr.contains("'\(open)/plain'"), "\(plain)")
  }

  @Test func theProgramIsTheAppUserWithNoCapabilityAndNoNewPrivileges() async throws {
    let d = try LockDevice()
    let fields = try await status(d)
    #expect(fields["Uid"]?.split(separator: "\t") == ["501", "501", "501", "501"], "\(fields)")
    #expect(fields["Gid"]?.split(separator: "\t") == ["501", "501", "501", "501"], "\(fields)")
    #expect(fields["Groups"] == "", "\(fields)")
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
      #expect(fields[set] == "0000000000000000", "\(set): \(fields[set] ?? "missing")")
    }
    #expect(fields["NoNewPrivs"] == "1")
    // Nor can it get root back: setuid programs do not raise it (no_new_privs), setuid(0) is refused.
    #expect(try await confined(d, "setpriv --reuid=0 true").status != 0)
    #expect(try await confined(d, "su -c true root </dev/null").status != 0)
  }

  @Test func theProgramCannotChmodALockedRootOwnedFileBack() async throws {
    let d = try LockDevice()
    try await d.protfs(["lock", "--grace", "0"])
    let file = d.path("complete.txt")
    let chmod = try await confined(d, "chmod u+r '\(file)'")
    #expect(chmod.status != 0 && chmod.stderr.contains("Operation not permitted"), "\(chmod)")
    #expect(d.t.mode(file) == 0)
    #expect(try await confined(d, "cat '\(file)'").status != 0)
  }

  /// Needs the lock engine to hand locked items to root: before that, the app user still owns a file
  /// it made and can chmod it back.
  @Test func theProgramCannotChmodBackALockedFileItMade() async throws {
    let d = try LockDevice()
    let file = d.path("mine.txt")
    let made = try await confined(d, "echo secret > '\(file)'")
    #expect(made.status == 0, "\(made)")
    #expect(try await d.protfs(["set-class", "complete", file]).status == 0)
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    let undo = try await confined(d, "chmod u+rw '\(file)'; cat '\(file)'")
    #expect(undo.status != 0, "\(undo)")
    #expect(!undo.stdout.contains("secret"), "\(undo)")
    #expect(try await d.protfs(["unlock"]).status == 0)
    let after = try await confined(d, "cat '\(file)' && echo more >> '\(file)'")
    #expect(after.status == 0 && after.stdout == "secret\n", "\(after)")
  }

  @Test func theProgramCannotTouchTheDeviceState() async throws {
    let d = try LockDevice()
    try await d.protfs(["passcode", "set", "--passcode", "1234"], environment: Self.cheap)
    try await d.protfs(["lock", "--grace", "0"])
    let state = d.root + "/.protfs"
    let before = try FileManager.default.contentsOfDirectory(atPath: state).sorted()
    let record = FileManager.default.contents(atPath: state + "/lock-state.json")
    #expect(record != nil)
    for script in [
      "ls '\(state)'", "cat '\(state)/lock-state.json'", "rm -f '\(state)/lock-state.json'",
      "echo '{}' > '\(state)/lock-state.json'", "touch '\(state)/forged'", "mv '\(state)' '\(d.root)/moved'",
      "chmod 777 '\(state)'",
    ] {
      let result = try await confined(d, script)
      #expect(result.status != 0, "\(script): \(result)")
    }
    #expect(try FileManager.default.contentsOfDirectory(atPath: state).sorted() == before)
    #expect(FileManager.default.contents(atPath: state + "/lock-state.json") == record)
    #expect(d.t.mode(state) == 0o700)
  }

  @Test func aUserNamespaceGivesTheProgramNothingOverLockedFiles() async throws {
    let d = try LockDevice()
    try await d.protfs(["lock", "--grace", "0"])
    let file = d.path("complete.txt")
    // Whether or not the kernel lets it make the namespace, it must not read or chmod the file.
    let read = try await confined(d, "unshare -r cat '\(file)'")
    #expect(read.status != 0 && !read.stdout.contains("contents of"), "\(read)")
    #expect(try await confined(d, "unshare -r chmod 644 '\(file)'").status != 0)
    #expect(try await confined(d, "unshare -r touch '\(d.root)/.protfs/forged'").status != 0)
    #expect(d.t.mode(file) == 0)
  }

  @Test func theProgramReadsAndWritesItsOwnContainerWhileDataIsAvailable() async throws {
    let d = try LockDevice()
    let container = d.t.containerPath(LockDevice.bundle)
    let script = """
      cd '\(container)' || exit 2
      echo one > Documents/new.txt && echo two > Documents/new.txt && cat Documents/new.txt &&
      rm Documents/new.txt && mkdir Documents/Folder && rmdir Documents/Folder &&
      echo cached > Library/Caches/c && cat Library/Caches/c && rm Library/Caches/c &&
      echo scratch > tmp/t && rm tmp/t && cat Documents/none.txt
      """
    let result = try await confined(d, script)
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout == "two\ncached\ncontents of none.txt\n")
    var info = stat()
    #expect(stat(container + "/Documents", &info) == 0 && info.st_uid == 501 && info.st_gid == 501)
    // Others' containers and the device's own directories stay closed to it.
    #expect(try await confined(d, "touch '\(d.root)/Containers/com.evil.app'").status != 0)
    #expect(try await confined(d, "touch '\(d.root)/planted'").status != 0)
  }

  @Test func aDeviceTheAppUserCannotReachIsRefusedBeforeTheProgramRuns() async throws {
    let d = try LockDevice()
    chmod(d.t.directory, 0o700)
    let result = try await confined(d, "echo ran")
    #expect(result.status == 1, "\(result)")
    #expect(result.stdout.isEmpty, "\(result)")
    #expect(result.stderr.contains("'\(d.t.directory)'") && result.stderr.contains("chmod o+x"), "\(result)")
    #expect(result.stderr.split(separator: "\n").count == 1, "\(result)")
  }

  @Test func theProgramSeesNoPasscode() async throws {
    let d = try LockDevice()
    try await d.protfs(["passcode", "set", "--passcode", "1234"], environment: Self.cheap)
    // The scheduled unlock needs the passcode, so exec holds it while the program runs.
    let secrets = ["secret-on-argv", "secret-after-equals", "secret-in-env", "secret-current"]
    let script = "env; tr '\\0' ' ' </proc/$PPID/cmdline; tr '\\0' ' ' </proc/$PPID/environ; true"
    for options in [["--passcode", secrets[0]], ["--passcode=\(secrets[1])"]] {
      let result = try await confined(
        d, script, options: ["--schedule", "unlock@60s"] + options,
        environment: ["PROTFS_PASSCODE": secrets[2], "PROTFS_CURRENT_PASSCODE": secrets[3]])
      #expect(result.status == 0, "\(result)")
      #expect(result.stdout.contains("exec --schedule unlock@60s --passcode"), "\(result)")  // the parent's cmdline
      for secret in secrets { #expect(!result.stdout.contains(secret), "\(secret): \(result)") }
      #expect(!result.stdout.contains("PROTFS_PASSCODE=") && !result.stdout.contains("PROTFS_CURRENT_PASSCODE="))
    }
  }

  @Test func theProgramCannotUnlockTheDeviceEvenKnowingThePasscode() async throws {
    let d = try LockDevice()
    try await d.protfs(["passcode", "set", "--passcode", "1234"], environment: Self.cheap)
    try await d.protfs(["lock", "--grace", "0"])
    // A copy the app user can run: the build directory may be in a place only root can enter (a
    // clone in a `mktemp -d` directory, or under /root).
    let copy = d.t.directory + "/protfs"
    try FileManager.default.copyItem(atPath: Protfs.binary, toPath: copy)
    #expect(chmod(copy, 0o755) == 0)
    let protfs = "'\(copy)' --device '\(d.root)'"
    for command in ["unlock --passcode 1234", "passcode remove --current 1234", "reboot"] {
      let result = try await confined(d, "\(protfs) \(command)", environment: Self.cheap)
      #expect(result.status == 1, "\(command): \(result)")
      #expect(result.stderr.contains("Cannot read the state of the device '\(d.root)'"), "\(command): \(result)")
    }
    #expect(try await d.protfs(["status", "--json"]).stdout.contains(#""state" : "locked""#))
    #expect(try await confined(d, "cat '\(d.path("complete.txt"))'").status != 0)
  }
}

/// `--passcode-file` and `--current-file`: the passcode from a file or standard input, never on argv.
@Suite struct PasscodeFileTests {
  @Test func passcodesComeFromAFileOrStandardInput() async throws {
    let d = try LockDevice()
    let env = ExecConfinementTests.cheap
    let file = d.t.directory + "/passcode"
    try "2468\n".write(toFile: file, atomically: true, encoding: .utf8)
    let set = try await d.protfs(["passcode", "set", "--passcode-file", file], environment: env)
    #expect(set.status == 0, "\(set)")
    try await d.protfs(["lock", "--grace", "0"])
    let wrong = try await Protfs.run(
      ["--device", d.root, "unlock", "--passcode-file", "-"], environment: env, stdin: "1357\n")
    #expect(wrong.status == 1, "\(wrong)")
    let right = try await Protfs.run(
      ["--device", d.root, "unlock", "--passcode-file", "-"], environment: env, stdin: "2468\n")
    #expect(right.status == 0, "\(right)")
    let changed = try await Protfs.run(
      ["--device", d.root, "passcode", "set", "--current-file", file, "--passcode-file", "-"], environment: env,
      stdin: "9753\r\n")
    #expect(changed.status == 0, "\(changed)")
    try await d.protfs(["lock", "--grace", "0"])
    #expect(try await d.protfs(["unlock", "--passcode", "9753"], environment: env).status == 0)
  }

  @Test func badPasscodeSourcesAreRefusedClearly() async throws {
    let d = try LockDevice()
    let env = ExecConfinementTests.cheap
    try await d.protfs(["passcode", "set", "--passcode", "2468"], environment: env)
    try await d.protfs(["lock", "--grace", "0"])
    let both = try await d.protfs(["unlock", "--passcode", "2468", "--passcode-file", "-"], environment: env)
    #expect(both.status == 64 && both.stderr.contains("not both"), "\(both)")
    let missing = d.t.directory + "/nothing"
    let absent = try await d.protfs(["unlock", "--passcode-file", missing], environment: env)
    #expect(absent.status == 1 && absent.stderr.contains("'\(missing)'"), "\(absent)")
    let empty = try await Protfs.run(
      ["--device", d.root, "unlock", "--passcode-file", "-"], environment: env, stdin: "")
    #expect(empty.status == 1 && empty.stderr.contains("holds no passcode"), "\(empty)")
    let twice = try await d.protfs(
      ["passcode", "set", "--passcode-file", "-", "--current-file", "-"], environment: env)
    #expect(twice.status == 64 && twice.stderr.contains("standard input"), "\(twice)")
    #expect(try await d.protfs(["status", "--json"]).stdout.contains(#""state" : "locked""#))
  }
}
