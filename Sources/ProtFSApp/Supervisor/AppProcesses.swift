import Foundation
import ProtFSSystem
import Synchronization

/// Every process of one app, suspended, resumed, signalled and killed as one (docs/semantics.md
/// §8, §11): an app is all of its processes, and none of them may escape the system's hold.
///
/// Where the kernel has a writable cgroup v2 hierarchy, the app gets a cgroup of its own, below
/// the supervisor's (`…/protfs-app.<key>`), which its first process joins before it runs any of
/// the app's code: every process it ever starts is in it, `setsid` and double forks included.
/// Suspension is the cgroup freezer (`cgroup.freeze`), which no signal undoes (a SIGCONT from a
/// process of the app, or from anyone, resumes nothing), and the end is `cgroup.kill`. Elsewhere
/// the app is its process group (SIGSTOP, SIGCONT and SIGKILL to the group), which a `setsid`
/// child leaves: `launch` warns of it.
package final class AppProcesses: Sendable {
  /// The app's cgroup (its directory), or nil where its process group stands for it.
  package let cgroup: String?
  /// The leader of the app's process group, once started.
  private let leader = Mutex<pid_t>(0)

  /// A fresh cgroup named for `key` below this process's own, emptied of whatever an earlier
  /// supervisor of the same app left (processes of a supervisor killed with SIGKILL); a process
  /// group where there is no cgroup v2 this process may write.
  package init(key: String) {
    cgroup = Self.makeCgroup(named: Self.prefix + key)
  }

  /// The app's first process is `pid`, the leader of its process group.
  package func started(_ pid: pid_t) { leader.withLock { $0 = pid } }

  /// Stops every process of the app (SIGSTOP's effect, which nothing but `resume` undoes).
  package func suspend() {
    if let cgroup {
      Self.write("1", to: cgroup + "/cgroup.freeze")
      return
    }
    signalGroup(SIGSTOP)
  }

  /// Lets every process of the app run again.
  package func resume() {
    if let cgroup {
      Self.write("0", to: cgroup + "/cgroup.freeze")
      return
    }
    signalGroup(SIGCONT)
  }

  /// Ends every process of the app at once (SIGKILL), frozen or not.
  package func kill() {
    if let cgroup {
      Self.write("1", to: cgroup + "/cgroup.kill")
      return
    }
    signalGroup(SIGKILL)
  }

  /// Sends `signal` to every process of the app.
  package func signal(_ signal: Int32) {
    guard let cgroup else {
      signalGroup(signal)
      return
    }
    for pid in Self.members(of: cgroup) { _ = Kernel.kill(pid, signal) }
  }

  /// Whether every process of the app is stopped now (frozen, or stopped by SIGSTOP).
  package var isSuspended: Bool {
    if let cgroup { return Self.events(of: cgroup)["frozen"] == "1" }
    return ProcessIdentity.isStopped(leader.withLock { $0 })
  }

  /// After the app's first process ended: kills what it left, waits (up to `timeout` seconds)
  /// until none is left, and removes the cgroup.
  package func end(timeout: Double = 5) {
    kill()
    guard let cgroup else { return }
    let deadline = Date().addingTimeInterval(timeout)
    while Self.events(of: cgroup)["populated"] == "1", Date() < deadline { Kernel.usleep(2_000) }
    _ = Kernel.rmdir(cgroup)
  }

  private func signalGroup(_ signal: Int32) {
    let pid = leader.withLock { $0 }
    guard pid > 0 else { return }
    _ = Kernel.kill(-pid, signal)
  }

  // MARK: The cgroup v2 hierarchy

  /// The start of every app cgroup's name.
  static let prefix = "protfs-app."

  /// Makes the cgroup `name` below this process's own, or nil where that cannot be done.
  private static func makeCgroup(named name: String) -> String? {
    guard let parent = ownCgroup() else { return nil }
    let path = parent + "/" + name
    if FileManager.default.fileExists(atPath: path) {
      // Left by a supervisor that was killed: its processes go now, as they would have with it.
      write("1", to: path + "/cgroup.kill")
      let deadline = Date().addingTimeInterval(5)
      while events(of: path)["populated"] == "1", Date() < deadline { Kernel.usleep(2_000) }
      _ = Kernel.rmdir(path)
    }
    removeAbandonedCgroups(in: parent)
    guard case .success = Kernel.mkdir(path, 0o755) else { return nil }
    // A cgroup that cannot freeze or kill would not hold the app: use the process group instead.
    guard case .success = Kernel.access(path + "/cgroup.freeze", W_OK),
      case .success = Kernel.access(path + "/cgroup.kill", W_OK),
      case .success = Kernel.access(path + "/cgroup.procs", W_OK)
    else {
      _ = Kernel.rmdir(path)
      return nil
    }
    return path
  }

  /// Ends every process in the app cgroup `path`, which a supervisor killed with SIGKILL left
  /// (its `setsid` and double-forked children run on there, unsupervised), waits until it is
  /// empty (5 s at most) and removes it; returns how many processes it held. Only a directory of
  /// the cgroup v2 hierarchy named as an app's cgroup is touched: the path comes from the app's
  /// record, which names it, and nothing else is killed on its word.
  package static func endAbandoned(cgroup path: String) -> Int {
    guard let cgroup2 = MountInfo.entries().first(where: { $0.type == "cgroup2" }),
      path.hasPrefix(cgroup2.mountpoint + "/"),
      !path.split(separator: "/").contains(where: { $0 == ".." || $0 == "." }),
      path.split(separator: "/").last?.hasPrefix(prefix) == true
    else { return 0 }
    var info = stat()
    guard case .success = Kernel.lstat(path, &info), info.st_mode & S_IFMT == S_IFDIR else {
      return 0
    }
    let held = members(of: path).count
    if held > 0 {
      write("1", to: path + "/cgroup.kill")
      let deadline = Date().addingTimeInterval(5)
      while events(of: path)["populated"] == "1", Date() < deadline { Kernel.usleep(2_000) }
    }
    _ = Kernel.rmdir(path)
    return held
  }

  /// Removes the empty app cgroups that supervisors killed before they could remove them left in
  /// `parent` (each launch on another device or of another app makes one of its own, so nothing
  /// else would). Only those empty for a minute: a cgroup just made waits for its app to join it.
  /// The kernel refuses to remove one that holds a process.
  private static func removeAbandonedCgroups(in parent: String) {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent) else { return }
    let old = Date().addingTimeInterval(-60).timeIntervalSince1970
    for name in names where name.hasPrefix(prefix) {
      let path = parent + "/" + name
      var info = stat()
      guard case .success = Kernel.lstat(path, &info), info.st_mode & S_IFMT == S_IFDIR,
        Double(info.st_mtim.tv_sec) < old,
        events(of: path)["populated"] == "0"
      else { continue }
      _ = Kernel.rmdir(path)
    }
  }

  /// The directory of this process's cgroup in the cgroup v2 hierarchy, when one is mounted.
  package static func ownCgroup() -> String? {
    guard let cgroup2 = MountInfo.entries().first(where: { $0.type == "cgroup2" }),
      let groups = Kernel.readKernelFile("/proc/self/cgroup")
    else { return nil }
    let mountPoint = cgroup2.mountpoint
    let mountRoot = cgroup2.root
    // The v2 line of /proc/self/cgroup: "0::/PATH".
    guard
      let own = String(decoding: groups, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("0::") })
    else { return nil }
    var path = String(own.dropFirst(3))
    if mountRoot != "/", path.hasPrefix(mountRoot) { path = String(path.dropFirst(mountRoot.count)) }
    let directory = mountPoint + (path == "/" ? "" : path)
    return (try? Kernel.access(directory, W_OK).get()) != nil ? directory : nil
  }

  /// The pids in `cgroup`.
  private static func members(of cgroup: String) -> [pid_t] {
    guard let data = Kernel.readKernelFile(cgroup + "/cgroup.procs") else { return [] }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { pid_t($0) }
  }

  /// `cgroup.events` as keys and values ("populated 1", "frozen 0").
  private static func events(of cgroup: String) -> [String: String] {
    guard let data = Kernel.readKernelFile(cgroup + "/cgroup.events") else { return [:] }
    var events: [String: String] = [:]
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
      let parts = line.split(separator: " ")
      if parts.count == 2 { events[String(parts[0])] = String(parts[1]) }
    }
    return events
  }

  /// Writes `value` to the cgroup file `path`; whether it took.
  @discardableResult
  private static func write(_ value: String, to path: String) -> Bool {
    guard case .success(let fd) = Kernel.open(path, O_WRONLY | O_CLOEXEC) else { return false }
    defer { closeDescriptor(fd) }
    let bytes = Array(value.utf8)
    guard case .success(let written) = Kernel.write(fd, bytes, bytes.count) else {
      return false
    }
    return written == bytes.count
  }
}
