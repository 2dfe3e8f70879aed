import Foundation
import ProtFS
import ProtFSCLI
import ProtFSDownloads
import ProtFSLock
import ProtFSMount
import ProtFSSessions
import ProtFSSystem
import Testing

/// The library names a remedy, each feature its own; it never spells a command line (the CLI words
/// it).
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
    #expect(Set(Self.all.map(\.action)).count == Self.all.count - 1)
    #expect(Remedy.createContainer(bundleID: "com.example.app").advice.contains("com.example.app"))
    #expect(Remedy.setClass(path: "/d/x").advice.contains("/d/x"))
  }

  /// Every remedy a feature declares has its own command-line words, which name a protfs command
  /// or say what to run; only `.advice` is worded as the library words it.
  @Test(arguments: all)
  func theCommandLineWordsEveryRemedy(_ remedy: Remedy) {
    let words = remedy.commandLine(CommandSpelling(device: "/d", bundleID: "com.example.app"))
    #expect(words != remedy.advice, "\(remedy.action) has no command-line words")
    #expect(words.contains("protfs"), "\(remedy.action): \(words)")
  }

  @Test func theCommandLineWordsTheArguments() {
    let spelling = CommandSpelling(device: "/d")
    #expect(Remedy.setClass(path: "/d/x").commandLine(spelling).contains("set-class CLASS '/d/x'"))
    #expect(Remedy.resumeTask(id: 12).commandLine(spelling).contains("tasks resume 12"))
    #expect(Remedy.unmount(mountpoint: "/mnt/m").commandLine(spelling).contains("unmount '/mnt/m'"))
    #expect(Remedy.retry(operation: "lock").commandLine(spelling).contains("--device /d lock"))
    #expect(Remedy.runAsRoot(orChown: true).commandLine(spelling).contains("chown"))
    #expect(!Remedy.runAsRoot(orChown: false).commandLine(spelling).contains("chown"))
    #expect(Remedy.advice("do this").commandLine(spelling) == "do this")
  }

  /// A remedy a newer feature adds, which the command line has no words for, is worded as the
  /// library words it rather than lost.
  @Test func anActionTheCommandLineDoesNotKnowKeepsTheLibrarysWords() {
    let remedy = Remedy(Remedy.Action("somethingNew"), advice: "do the new thing")
    #expect(remedy.commandLine(CommandSpelling()) == "do the new thing")
  }

  @Test func theDescriptionWordsTheRemedyAsTheCallerAsks() {
    let error = ProtFSError(
      .notFound, "The device '/d' has no container for 'a.b'.", remedy: .createContainer(bundleID: "a.b"))
    #expect(error.description == "The device '/d' has no container for 'a.b'; create the container of a.b first.")
    #expect(error.description(advice: { _ in "run X" }) == "The device '/d' has no container for 'a.b'; run X.")
  }

  /// An error goes through JSON whole (the session service's replies, the download store's
  /// `failure` column): code, remedy with its arguments and words, the failing call and errno.
  @Test(arguments: all)
  func anErrorRoundTripsThroughJSON(_ remedy: Remedy) throws {
    let error = ProtFSError(.network, "It broke off.", path: "/d/x", syscall: .read, errno: EIO, remedy: remedy)
    let decoded = try JSONDecoder().decode(ProtFSError.self, from: JSONEncoder().encode(error))
    #expect(decoded == error)
  }

  /// Download stores written before remedies were an open set hold `{"<action>": {<arguments>}}`
  /// and codes as plain strings: they still decode, and the command line words them as before.
  @Test func anErrorStoredByAnEarlierVersionStillDecodes() throws {
    let stored = #"""
      {"code":"protectedDataUnavailable","message":"Locked.","path":"/d/x","errno":1,
       "remedy":{"setClass":{"path":"/d/x"}}}
      """#
    let error = try JSONDecoder().decode(ProtFSError.self, from: Data(stored.utf8))
    #expect(error.code == .protectedDataUnavailable)
    #expect(error.remedy?.action == .setClass)
    #expect(error.remedy?.text("path") == "/d/x")
    #expect(error.hint == nil)
    #expect(error.commandLineDescription(CommandSpelling()).contains("set-class CLASS '/d/x'"))

    let resume = try JSONDecoder().decode(Remedy.self, from: Data(#"{"resumeTask":{"id":7}}"#.utf8))
    #expect(resume.commandLine(CommandSpelling()).contains("tasks resume 7"))
    let chown = try JSONDecoder().decode(Remedy.self, from: Data(#"{"runAsRoot":{"orChown":true}}"#.utf8))
    #expect(chown.flag("orChown"))
    let words = try JSONDecoder().decode(Remedy.self, from: Data(#"{"advice":{"_0":"do this"}}"#.utf8))
    #expect(words == .advice("do this"))
    #expect(throws: DecodingError.self) { try JSONDecoder().decode(Remedy.self, from: Data("{}".utf8)) }
  }

  /// A failure through the syscall layer names the call that failed.
  @Test func aSystemCallFailureNamesTheCall() throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-remedy-\(getpid())").path
    let error = #expect(throws: ProtFSError.self) { try DirectoryHandle(path: root + "/missing") }
    #expect(error?.code == .notFound)
    #expect(error?.syscall == .open)
    #expect(error?.errno == ENOENT)
  }
}
