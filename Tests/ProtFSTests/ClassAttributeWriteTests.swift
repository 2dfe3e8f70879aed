import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// `ProtectionClass.write(to:)`, the one function that writes `user.protfs.class`.
@Suite struct ClassAttributeWriteTests {
  /// The attribute as `getfattr` prints it, or nil when it has none.
  func getfattr(_ path: String) async throws -> String? {
    let read = try await Protfs.runProgram(
      "/usr/bin/getfattr", ["--only-values", "-h", "-n", AttributeName.protectionClass, path])
    return read.status == 0 ? read.stdout : nil
  }

  @Test func writesTheRawValueGetfattrReads() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let path = t.containerPath("com.example.app", "Documents/f.txt")
    try t.writeFile(path)
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    try #require(fd >= 0)
    defer { close(fd) }
    // O_PATH, which glibc hides without _GNU_SOURCE (CProtFSSys's PROTFS_O_PATH).
    let pathOnly = open(path, 0o10_000_000 | O_CLOEXEC)
    try #require(pathOnly >= 0)
    defer { close(pathOnly) }
    for cls in ProtectionClass.allCases {
      try cls.write(toDescriptor: fd, path: path)
      #expect(try await getfattr(path) == cls.rawValue)
    }
    for cls in ProtectionClass.allCases {
      try cls.write(to: .descriptor(pathOnly, pathOnly: true)).get()
      #expect(try await getfattr(path) == cls.rawValue)
    }
  }

  @Test func writesAnEntryWithoutFollowingALink() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let documents = t.containerPath("com.example.app", "Documents")
    try t.writeFile(documents + "/f.txt")
    try FileManager.default.createSymbolicLink(atPath: documents + "/link", withDestinationPath: "f.txt")
    let directory = open(documents, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    try #require(directory >= 0)
    defer { close(directory) }
    try ProtectionClass.completeUnlessOpen.write(
      to: .entry(dirfd: directory, name: FileName("f.txt")), path: documents + "/f.txt")
    #expect(try await getfattr(documents + "/f.txt") == "NSFileProtectionCompleteUnlessOpen")
    // The kernel refuses user.* attributes on a link; the link's target keeps its class.
    #expect(throws: ProtFSError.self) {
      try ProtectionClass.none.write(to: .entry(dirfd: directory, name: FileName("link")), path: documents + "/link")
    }
    #expect(try await getfattr(documents + "/f.txt") == "NSFileProtectionCompleteUnlessOpen")
  }

  @Test func aRefusedWriteNamesThePath() throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let path = t.containerPath("com.example.app", "Documents/f.txt")
    try t.writeFile(path)
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    try #require(fd >= 0)
    defer { close(fd) }
    let faults = SyscallFaults()
    faults.fail(.setxattr, with: EIO)
    let outcome = faults.during {
      Result { () throws(ProtFSError) in try ProtectionClass.complete.write(toDescriptor: fd, path: path) }
    }
    guard case .failure(let error) = outcome else {
      Issue.record("the write succeeded though setxattr failed")
      return
    }
    #expect(error.errno == EIO, "\(error)")
    #expect(error.path == path, "\(error)")
    #expect(t.rawClass(path) == nil)
  }
}
