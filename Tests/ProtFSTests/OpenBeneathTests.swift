import Foundation
import ProtFSTestSupport
import Testing

@testable import ProtFSSystem

/// `DirectoryHandle.openBeneath`, what `import-backup` opens a backup's files with: a file below
/// the directory opens; a symlink in any component, `..` and an absolute path do not. Both ways
/// answer the same: `openat2`, and the component walk used where the kernel has no `openat2`
/// (reached here by failing the first `open` with `ENOSYS`).
@Suite struct OpenBeneathTests {
  /// A directory holding `ab/file`, `link/` (a symlink to `ab`), `ab/out` (a symlink to a file
  /// outside) and `ab/fifo`, and a file beside it.
  func make() throws -> (TestDevice, DirectoryHandle) {
    let t = try TestDevice(initialize: false)
    let top = t.directory + "/top"
    #expect(mkdir(top, 0o755) == 0 && mkdir(top + "/ab", 0o755) == 0)
    try "inside".write(toFile: top + "/ab/file", atomically: false, encoding: .utf8)
    try "outside".write(toFile: t.directory + "/beside", atomically: false, encoding: .utf8)
    #expect(symlink("ab", top + "/link") == 0 && symlink(t.directory + "/beside", top + "/ab/out") == 0)
    #expect(mkfifo(top + "/ab/fifo", 0o644) == 0)
    return (t, try DirectoryHandle(path: top))
  }

  /// What opening each path answers: 0 when it opens, else the errno.
  func answers(_ top: DirectoryHandle, walk: Bool) -> [String: Int32] {
    var result: [String: Int32] = [:]
    for path in ["ab/file", "link/file", "ab/out", "../beside", "/etc/passwd", "ab/../ab/file", "ab/none", "ab/fifo"] {
      let faults = SyscallFaults()
      if walk { faults.fail(.open, with: ENOSYS) }
      switch faults.during({ top.openBeneath(path, flags: O_RDONLY | O_NONBLOCK) }) {
      case .success(let fd):
        close(fd)
        result[path] = 0
      case .failure(let e):
        result[path] = e.rawValue
      }
    }
    return result
  }

  @Test(arguments: [false, true])
  func onlyWhatIsBelowOpensAndNoLinkIsFollowed(walk: Bool) throws {
    let (t, top) = try make()
    let found = withExtendedLifetime(t) { answers(top, walk: walk) }
    #expect(found["ab/file"] == 0 && found["ab/fifo"] == 0, "\(found)")
    #expect(found["link/file"] == ELOOP && found["ab/out"] == ELOOP, "\(found)")
    #expect(found["../beside"] == EXDEV && found["/etc/passwd"] == EXDEV, "\(found)")
    #expect(found["ab/none"] == ENOENT)
    // `..` that stays below is still refused by the walk; openat2 resolves it, within the top.
    #expect(found["ab/../ab/file"] == (walk ? EXDEV : 0), "\(found)")
  }
}
