import Foundation
import ProtFSTestSupport
import Testing

/// An app written as an attacker writes one, in C: it passes for a Swift program (it has a section
/// named `swift5_…`, which is what protfs looks for before it prewarms or bundles an app), ignores
/// every signal it can, and starts a child in a session of its own, which starts a grandchild.
/// Each of the three writes its tick count to `DIRECTORY/ROLE-PID` every 20 ms, so a test sees
/// which of them run, and which are gone.
///
/// `hostile-app MODE DIRECTORY`, MODE one of:
/// - `held`: says `held` on its events socket (as `UIApplicationMain` does in a prewarmed app) once
///   all three tick, then keeps running;
/// - `close`: the same, having shut its events socket for reading first, then closes it;
/// - `never`: never says it, as an app that never reaches `UIApplicationMain`.
enum HostileApp {
  static let source = #"""
    #include <fcntl.h>
    #include <signal.h>
    #include <stdio.h>
    #include <string.h>
    #include <sys/socket.h>
    #include <unistd.h>

    /* What protfs takes for a Swift program. */
    __attribute__((used, section("swift5_protocols"))) static const char marker[4] = "fake";

    static void tick(const char *directory, const char *role, int ready, unsigned long count) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s-%d", directory, role, (int)getpid());
      for (;; count++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
          dprintf(fd, "%lu\n", count);
          close(fd);
        }
        if (ready >= 0) {
          (void)write(ready, "x", 1);
          close(ready);
          ready = -1;
        }
        if (ready == -2) return;
        usleep(20000);
      }
    }

    int main(int argc, char **argv) {
      if (argc < 3) return 64;
      for (int number = 1; number < 32; number++) signal(number, SIG_IGN);
      const char *mode = argv[1], *directory = argv[2];
      int ready[2];
      if (pipe(ready) != 0) return 71;
      if (fork() == 0) {
        close(3); /* only the app's first process speaks on its events socket */
        setsid();
        if (fork() == 0) tick(directory, "grandchild", ready[1], 0);
        tick(directory, "child", ready[1], 0);
      }
      close(ready[1]);
      char byte;
      for (int seen = 0; seen < 2 && read(ready[0], &byte, 1) == 1; seen++) {
      }
      tick(directory, "main", -2, 0); /* its first tick, before it is held (and frozen) */
      /* Reading ended before the supervisor hears "held": nothing can reach this app any more. */
      if (strcmp(mode, "close") == 0) shutdown(3, SHUT_RD);
      if (strcmp(mode, "never") != 0) (void)write(3, "held\n", 5);
      if (strcmp(mode, "close") == 0) close(3);
      tick(directory, "main", -1, 1);
    }
    """#

  /// Builds the app in `d`'s scripts directory; returns its path and the directory its processes
  /// tick in (writable by the app user).
  static func build(in d: AppDevice) async throws -> (program: String, ticks: String) {
    let sourcePath = d.scripts + "/hostile-app.c"
    try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
    let program = d.scripts + "/hostile-app"
    let cc = try #require(Self.compiler(), "no C compiler on PATH (the Swift toolchain's clang is one)")
    let built = try await Protfs.runProgram(cc, ["-O1", "-o", program, sourcePath])
    try #require(built.status == 0, "\(built)")
    chmod(program, 0o755)
    let ticks = d.scripts + "/ticks"
    try FileManager.default.createDirectory(atPath: ticks, withIntermediateDirectories: true)
    chmod(ticks, 0o777)
    return (program, ticks)
  }

  /// The first of clang (beside `swift`), cc and gcc on PATH.
  static func compiler() -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for name in ["clang", "cc", "gcc"] {
      for directory in path.split(separator: ":") where access("\(directory)/\(name)", X_OK) == 0 {
        return "\(directory)/\(name)"
      }
    }
    return nil
  }

  /// The processes that ticked in `ticks`: role (`main`, `child`, `grandchild`) and pid.
  static func processes(_ ticks: String) -> [(role: String, pid: pid_t)] {
    ((try? FileManager.default.contentsOfDirectory(atPath: ticks)) ?? []).compactMap { name in
      guard let dash = name.lastIndex(of: "-"), let pid = pid_t(name[name.index(after: dash)...]) else { return nil }
      return (String(name[..<dash]), pid)
    }
  }

  /// Each process's tick count now, by file name.
  static func counts(_ ticks: String) -> [String: String] {
    var counts: [String: String] = [:]
    for name in (try? FileManager.default.contentsOfDirectory(atPath: ticks)) ?? [] {
      counts[name] = try? String(contentsOfFile: ticks + "/" + name, encoding: .utf8)
    }
    return counts
  }

  /// Whether process `pid` is gone (or a zombie: it will never run again).
  static func isGone(_ pid: pid_t) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
    let state = stat.split(separator: ")").last?.split(separator: " ").first
    return state == "Z" || state == "X"
  }

  /// The pids of `processes` that still run.
  static func running(_ processes: [(role: String, pid: pid_t)]) -> [String] {
    processes.filter { !isGone($0.pid) }.map { "\($0.role) \($0.pid)" }
  }

  /// Waits (at most 20 s, off the pool) until processes with all three roles have ticked in
  /// `ticks`, besides those in `before`; returns them.
  static func waitForAllThree(_ ticks: String, besides before: [pid_t] = []) async -> [(role: String, pid: pid_t)] {
    await offPool {
      let deadline = Date() + 20
      while Date() < deadline {
        let new = processes(ticks).filter { !before.contains($0.pid) }
        if Set(new.map(\.role)) == ["main", "child", "grandchild"] { return new }
        usleep(10_000)
      }
      return processes(ticks).filter { !before.contains($0.pid) }
    }
  }

  /// Kills whatever of `processes` still runs (a test's cleanup after a failure).
  static func kill(_ processes: [(role: String, pid: pid_t)]) {
    for process in processes where !isGone(process.pid) {
      // Only while the pid is still the hostile app's.
      let command = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(process.pid)/cmdline"))) ?? Data()
      if String(decoding: command, as: UTF8.self).contains("hostile-app") { Glibc.kill(process.pid, SIGKILL) }
    }
  }
}
