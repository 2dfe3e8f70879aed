import Foundation
import ProtFSApp
import Testing

/// An app's cgroup outlives a supervisor killed with SIGKILL; the next launch, of any app on any
/// device, removes those left empty for a minute, and no other.
@Suite struct AppCgroupTests {
  @Test func aLaunchRemovesTheEmptyCgroupsKilledSupervisorsLeftAndNoneStillInUse() throws {
    let parent = try #require(AppProcesses.ownCgroup(), "this machine has a writable cgroup v2 hierarchy")
    let tag = UUID().uuidString.prefix(8)
    let abandoned = parent + "/protfs-app.abandoned-\(tag)"
    let fresh = parent + "/protfs-app.fresh-\(tag)"
    for path in [abandoned, fresh] { #expect(mkdir(path, 0o755) == 0, "\(path)") }
    defer { for path in [abandoned, fresh] { rmdir(path) } }
    // Left by a supervisor killed two hours ago.
    var times = [timespec(tv_sec: time(nil) - 7200, tv_nsec: 0), timespec(tv_sec: time(nil) - 7200, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, abandoned, &times, 0) == 0)
    let processes = AppProcesses(key: "launch-\(tag)")
    defer { processes.end() }
    #expect(processes.cgroup != nil)
    #expect(!FileManager.default.fileExists(atPath: abandoned))
    // Made a moment ago, for an app that has not joined it yet: kept.
    #expect(FileManager.default.fileExists(atPath: fresh))
  }
}
