import CAttr
import Foundation
import ProtFSTestSupport
import Testing

@testable import ProtFS
@testable import ProtFSSystem

/// `ItemCopier.move`, the one move across a filesystem boundary (called where rename(2) fails
/// with EXDEV).
@Suite struct CrossFilesystemMoveTests {
  /// A scratch directory `name` of `t`, made and opened.
  private func directory(_ t: TestDevice, _ name: String) throws -> DirectoryHandle {
    try FileManager.default.createDirectory(atPath: t.directory + "/" + name, withIntermediateDirectories: true)
    return try DirectoryHandle(path: t.directory + "/" + name)
  }

  @Test func aMoveCopiesTheFileWithItsAttributesAndRemovesTheSource() throws {
    let t = try TestDevice()
    let (from, to) = (try directory(t, "from"), try directory(t, "to"))
    try Data("hello".utf8).write(to: URL(fileURLWithPath: from.pathOf("file")))
    chmod(from.pathOf("file"), 0o640)
    #expect(setxattr(from.pathOf("file"), "user.note", "kept", 4, 0) == 0)
    try ItemCopier.move("file", in: from, to: "moved", in: to)
    #expect(!FileManager.default.fileExists(atPath: from.pathOf("file")))
    #expect(FileManager.default.contents(atPath: to.pathOf("moved")) == Data("hello".utf8))
    #expect(try to.status("moved").permissions.rawValue == 0o640)
    var value = [UInt8](repeating: 0, count: 8)
    #expect(getxattr(to.pathOf("moved"), "user.note", &value, 8) == 4)
    #expect(try Set(to.entries().map(\.name)) == ["moved"])
  }

  @Test func aMoveReplacesOnlyWhenAskedAndLabelsTheCopy() throws {
    let t = try TestDevice()
    let (from, to) = (try directory(t, "from"), try directory(t, "to"))
    try Data("new".utf8).write(to: URL(fileURLWithPath: from.pathOf("file")))
    try Data("old".utf8).write(to: URL(fileURLWithPath: to.pathOf("file")))
    let refused = #expect(throws: ProtFSError.self) { try ItemCopier.move("file", in: from, to: "file", in: to) }
    #expect(refused?.errno == EEXIST)
    #expect(FileManager.default.contents(atPath: from.pathOf("file")) == Data("new".utf8))
    var labelled: [Int32] = []
    try ItemCopier.move("file", in: from, to: "file", in: to, replacing: true) { fd throws(ProtFSError) in
      labelled.append(fd)
      _ = fsetxattr(fd, "user.label", "x", 1, 0)
    }
    #expect(labelled.count == 1)
    #expect(FileManager.default.contents(atPath: to.pathOf("file")) == Data("new".utf8))
    #expect(getxattr(to.pathOf("file"), "user.label", nil, 0) == 1)
    #expect(try Set(to.entries().map(\.name)) == ["file"] && from.entries().isEmpty)
  }

  @Test func aFailedMoveLeavesTheSourceAndNoPartialCopy() throws {
    let t = try TestDevice()
    let (from, to) = (try directory(t, "from"), try directory(t, "to"))
    try Data(repeating: 7, count: 1 << 16).write(to: URL(fileURLWithPath: from.pathOf("file")))
    let faults = SyscallFaults()
    faults.fail(.copyFileRange, with: EXDEV)
    faults.fail(.write, with: ENOSPC)
    let error = #expect(throws: ProtFSError.self) {
      try faults.during { () throws(ProtFSError) in try ItemCopier.move("file", in: from, to: "file", in: to) }
    }
    #expect(error?.errno == ENOSPC)
    #expect(FileManager.default.contents(atPath: from.pathOf("file"))?.count == 1 << 16)
    #expect(try to.entries().isEmpty)
  }

  @Test func aLabelledMoveRefusesAnythingButAFile() throws {
    let t = try TestDevice()
    let (from, to) = (try directory(t, "from"), try directory(t, "to"))
    #expect(symlink("/etc/passwd", from.pathOf("file")) == 0)
    let error = #expect(throws: ProtFSError.self) {
      try ItemCopier.move("file", in: from, to: "file", in: to, replacing: true) { _ throws(ProtFSError) in }
    }
    #expect(error?.message.contains("not a regular file") == true)
    #expect(try to.entries().isEmpty && from.entries().count == 1)
  }
}
