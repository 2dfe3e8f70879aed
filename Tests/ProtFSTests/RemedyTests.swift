import Foundation
import ProtFS
import ProtFSSystem
import Testing

/// The library names a remedy; it never spells a command line (the CLI words it).
@Suite("Remedies")
struct RemedyTests {
  static let all: [Remedy] = [
    .unlock, .setClass(path: "/d/x"), .createContainer(bundleID: "com.example.app"), .initializeDevice(root: "/d"),
    .initializeDownloadsDirectory, .resumeAfterUnlock, .purgeCaches, .listTasks, .resetPasscode,
    .retry(operation: "lock"),
    .inspectJournal, .runAsRoot(orChown: true), .runAsRoot(orChown: false), .runAsDeviceOwner, .confineAsRoot,
    .enableFuse, .unmount(mountpoint: "/mnt/device"), .listSessions, .startSessionService, .restartSessionService,
    .useSessionFromItsApp, .resumeTask(id: 12),
  ]

  @Test(arguments: all)
  func adviceNamesNoCommand(_ remedy: Remedy) {
    #expect(!remedy.advice.contains("protfs"), "\(remedy): \(remedy.advice)")
    #expect(!remedy.advice.contains("`"), "\(remedy): \(remedy.advice)")
    #expect(!remedy.advice.isEmpty)
  }

  @Test func eachRemedyHasItsOwnAdvice() {
    #expect(Set(Self.all.map(\.advice)).count == Self.all.count)
    #expect(Remedy.createContainer(bundleID: "com.example.app").advice.contains("com.example.app"))
    #expect(Remedy.setClass(path: "/d/x").advice.contains("/d/x"))
  }

  @Test func theDescriptionWordsTheRemedyAsTheCallerAsks() {
    let error = ProtFSError(
      .notFound, "The device '/d' has no container for 'a.b'.", remedy: .createContainer(bundleID: "a.b"))
    #expect(error.description == "The device '/d' has no container for 'a.b'; create the container of a.b first.")
    #expect(error.description(advice: { _ in "run X" }) == "The device '/d' has no container for 'a.b'; run X.")
  }
}
