import Foundation
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// `openat2(2)` with `RESOLVE_BENEATH` answers `EAGAIN` when it resolves `..` while any rename
/// happens anywhere on the system; a busy machine (this suite, run in parallel) renames all the
/// time. `Kernel.openAt2` retries, so the answer is the file system's and not the race's: the audit
/// once missed a dangling link leaving its container because its `..` lost such a race.
@Suite("openat2 under concurrent renames")
struct OpenAt2RetryTests {
  @Test func aRaceWithARenameIsRetriedAndNeverAnswered() throws {
    let t = try TestDevice(initialize: false)
    let root = t.directory + "/root"
    let churn = t.directory + "/churn"
    for directory in [root, root + "/d", churn, churn + "/a"] { #expect(mkdir(directory, 0o755) == 0) }
    #expect(symlink("../../nowhere", root + "/d/out") == 0)
    let rootFD = open(root, Kernel.pathOnly | O_DIRECTORY | O_CLOEXEC)
    #expect(rootFD >= 0)
    defer { close(rootFD) }

    let stop = Atomic<Bool>(false)
    let started = DispatchSemaphore(value: 0)
    let stopped = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      var flip = false
      while !stop.load(ordering: .relaxed) {
        rename(churn + (flip ? "/b" : "/a"), churn + (flip ? "/a" : "/b"))
        if !flip { started.signal() }
        flip.toggle()
      }
      stopped.signal()
    }
    started.wait()
    var answers: [Int32: Int] = [:]
    for _ in 0..<5_000 {
      let fd = Kernel.openAt2(rootFD, "d/out", Kernel.pathOnly | O_CLOEXEC, resolve: [.beneath])
      answers[fd >= 0 ? 0 : errno, default: 0] += 1
      if fd >= 0 { close(fd) }
    }
    stop.store(true, ordering: .relaxed)
    stopped.wait()
    // Leaving the directory is EXDEV, every time; without the retry about one in ten is EAGAIN.
    #expect(answers == [EXDEV: 5_000], "\(answers.map { "\(String(cString: strerror($0.key))): \($0.value)" })")
  }
}
