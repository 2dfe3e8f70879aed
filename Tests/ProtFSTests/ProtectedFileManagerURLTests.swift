import Foundation
import ProtFS
import ProtFSFoundation
import ProtFSTestSupport
import Testing

/// The URL and search-path calls of `ProtectedFileManager`, with Foundation's names.
@Suite struct ProtectedFileManagerURLTests {
  let app = "com.example.app"

  @Test func urlsForTheAppsDirectoriesAreItsContainers() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device, bundleID: try BundleID(app))
    let documents = try #require(fm.urls(for: .documentDirectory, in: .userDomainMask).first)
    #expect(documents.path == t.containerPath(app, "Documents"))
    #expect(fm.urls(for: .cachesDirectory, in: .userDomainMask).first?.path == t.containerPath(app, "Library/Caches"))
    #expect(
      fm.urls(for: .applicationSupportDirectory, in: .userDomainMask).first?.path
        == t.containerPath(app, "Library/Application Support"))
    #expect(fm.urls(for: .libraryDirectory, in: .userDomainMask).first?.path == t.containerPath(app, "Library"))
    #expect(fm.urls(for: .desktopDirectory, in: .userDomainMask).isEmpty)
    #expect(fm.urls(for: .documentDirectory, in: .systemDomainMask).isEmpty)
    // Without an app (and not run by `protfs app`) there is no container to answer for.
    #expect(ProtectedFileManager(device: t.device).urls(for: .documentDirectory, in: .userDomainMask).isEmpty)
  }

  @Test func copyAndRemoveByURLKeepTheClassAndLeaveNothing() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device, bundleID: try BundleID(app))
    let documents = try #require(fm.urls(for: .documentDirectory, in: .userDomainMask).first)
    let source = documents.appendingPathComponent("a.txt")
    try fm.write(Data("a".utf8), toPath: source.path, options: .completeFileProtection)
    let copy = documents.appendingPathComponent("b.txt")
    try fm.copyItem(at: source, to: copy)
    #expect(try fm.fileProtection(ofItemAtPath: copy.path) == .complete)
    try fm.removeItem(at: copy)
    #expect(!fm.fileExists(atPath: copy.path))
    #expect(throws: CocoaError.self) { try fm.removeItem(at: copy) }
  }

  @Test func isExecutableFileFollowsTheModeAndNoLinkAndSearchableDirectoriesAreExecutable() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let tool = t.containerPath(app, "Documents/tool.sh")
    try t.writeFile(tool, "#!/bin/sh\n", mode: 0o755)
    let data = t.containerPath(app, "Documents/data.txt")
    try t.writeFile(data, "x", mode: 0o644)
    symlink(tool, t.containerPath(app, "Documents/link"))
    #expect(fm.isExecutableFile(atPath: tool))
    #expect(!fm.isExecutableFile(atPath: data))
    #expect(!fm.isExecutableFile(atPath: t.containerPath(app, "Documents/link")))
    // A directory the caller may search is executable, as Apple's access(X_OK) says (root may
    // search any).
    #expect(fm.isExecutableFile(atPath: t.containerPath(app, "Documents")))
    #expect(!fm.isExecutableFile(atPath: "/bin/sh"))
  }
}
