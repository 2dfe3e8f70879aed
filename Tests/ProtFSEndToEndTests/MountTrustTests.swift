import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// The mount against a program that tries to keep or win back locked bytes (docs/semantics.md §7,
/// §11), as the app user (501) would through the mount.
@Suite(.serialized) struct MountTrustTests {
  @Test func aHandleOpenedWhileTheFileWasClassNoneReadsNothingOnceItIsCompleteAndLocked() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/notes.txt", ProtectionClass.none, "first class none, then complete\n")
    }
    let held = try Conversation.holding("\(m.documents)/notes.txt", flags: "os.O_RDONLY", user: 501)
    #expect(await held.line() == "opened")
    // Read once: the kernel now caches its pages, as it may for class none.
    #expect(await held.ask("read") == "ok first class none, then complete")
    let set = try await m.protfs(["set-class", "complete", m.backingDocuments + "/notes.txt"])
    #expect(set.status == 0, "\(set)")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(await held.ask("read") == "err 1", "a stale class or cached pages served a locked complete file")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(await held.ask("read") == "ok first class none, then complete")
  }

  @Test func aHandleWritingWhileTheFileWasClassNoneFailsItsWritesOnceItIsCompleteAndLocked() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/notes.txt", ProtectionClass.none, "first class none, then complete\n")
    }
    // Root: the mount decides for it as for any process, and the file is root's 0644.
    let held = try Conversation.holding("\(m.documents)/notes.txt")
    try #require(await held.line() == "opened")
    // Written into the kernel's page cache, as class none may be; not yet written back.
    #expect(await held.ask("write") == "ok")
    let set = try await m.protfs(["set-class", "complete", m.backingDocuments + "/notes.txt"])
    #expect(set.status == 0, "\(set)")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(await held.ask("write") == "err 1", "a write into the page cache went on after the lock")
    // Past the last page: the kernel reads nothing before taking it into its cache.
    #expect(await held.ask("write-at 8192") == "err 1", "a write into the page cache went on after the lock")
    // The write made before the lock was written back when the lock dropped the file's pages.
    let backing = try String(contentsOfFile: m.backingDocuments + "/notes.txt", encoding: .utf8)
    #expect(backing == "first class none, then complete\nmore\n", "the write made before the lock was lost")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(await held.ask("write") == "ok")
    #expect(await held.ask("read") == "ok first class none, then complete|more|more")
  }

  @Test func pagesWrittenBackThroughAnAppendingHandleLandWhereTheyWereWritten() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/notes.txt", ProtectionClass.none, "first\n")
    }
    let cached = try Conversation.holding("\(m.documents)/notes.txt")
    try #require(await cached.line() == "opened")
    #expect(await cached.ask("write") == "ok")
    // Complete now: the next open is direct, and appends. The kernel writes the first handle's
    // pages back through the newest handle open for writing: this one.
    let set = try await m.protfs(["set-class", "complete", m.backingDocuments + "/notes.txt"])
    #expect(set.status == 0, "\(set)")
    let appending = try Conversation.holding("\(m.documents)/notes.txt", flags: "os.O_WRONLY | os.O_APPEND")
    try #require(await appending.line() == "opened")
    #expect(await cached.ask("sync") == "ok")
    let backing = try String(contentsOfFile: m.backingDocuments + "/notes.txt", encoding: .utf8)
    #expect(backing == "first\nmore\n", "pages written back were appended again")
  }

  @Test(arguments: ["rename", "link"])
  func aFileWithoutAClassOfItsOwnKeepsItsClassWhenMovedIntoAClassNoneDirectory(_ how: String) async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.directory(t, "Documents/vault", .complete)
      try MountedDevice.directory(t, "Documents/open", .none)
      // Made by another program behind the mount: no class of its own, complete by inheritance.
      let path = t.containerPath(MountedDevice.bundle, "Documents/vault/diary.txt")
      try t.writeFile(path, "locked bytes\n")
      chown(path, 501, 501)
    }
    #expect(m.t.rawClass(m.backingDocuments + "/vault/diary.txt") == nil)
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let verb = how == "rename" ? "mv" : "ln"
    let moved = try await m.sh("\(verb) '\(m.documents)/vault/diary.txt' '\(m.documents)/open/diary.txt'", as: 501)
    #expect(moved.status == 0, "\(moved)")
    let read = try await m.sh("cat '\(m.documents)/open/diary.txt'", as: 501)
    #expect(read.status != 0 && read.stderr.contains("Operation not permitted"), "\(read)")
    #expect(m.t.rawClass(m.backingDocuments + "/open/diary.txt") == "NSFileProtectionComplete")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(try await m.sh("cat '\(m.documents)/open/diary.txt'", as: 501).stdout == "locked bytes\n")
  }

  @Test func aDirectoryWithoutAClassOfItsOwnKeepsItsChildrensClassWhenMoved() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.directory(t, "Documents/vault", .complete)
      try MountedDevice.directory(t, "Documents/open", .none)
      let inner = t.containerPath(MountedDevice.bundle, "Documents/vault/box")
      mkdir(inner, 0o755)
      chown(inner, 501, 501)
      try t.writeFile(inner + "/letter.txt", "locked letter\n")
      chown(inner + "/letter.txt", 501, 501)
    }
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let moved = try await m.sh("mv '\(m.documents)/vault/box' '\(m.documents)/open/box'", as: 501)
    #expect(moved.status == 0, "\(moved)")
    let read = try await m.sh("cat '\(m.documents)/open/box/letter.txt'", as: 501)
    #expect(read.status != 0 && read.stderr.contains("Operation not permitted"), "\(read)")
  }
}
