import CProtFSLaunch
import Foundation
import ProtFS
import ProtFSLaunch
import Testing

@testable import ProtFSCLI

/// The request a launch sends to take a prewarmed app is made in two places, the protfs program's
/// C constructor and `LaunchRequest`; the supervisor decodes both the same way.
@Suite struct PrewarmRequestTests {
  /// The request the C constructor would send for `words` in `environment`.
  static func requestFromC(_ words: [String], _ environment: [String], directory: String, umask: String) -> [UInt8]? {
    let wordPointers = words.map { strdup($0) }
    let environmentPointers = environment.map { strdup($0) } + [nil]
    defer { (wordPointers + environmentPointers).forEach { free($0) } }
    var bytes: UnsafeMutablePointer<CChar>?
    var length = 0
    guard
      protfs_launch_request(Int32(words.count), wordPointers, environmentPointers, directory, umask, &bytes, &length)
        == 0, let bytes
    else { return nil }
    defer { free(bytes) }
    return Array(UnsafeRawBufferPointer(start: bytes, count: length))
  }

  @Test func theConstructorsRequestDecodesAsSwiftsWithThePasscodesLeftOut() throws {
    let words = ["--device", "/tmp/d", "app", "launch", "com.example.app", "--", "./My App", "", "é:\n1"]
    let environment = ["PATH=/usr/bin:/bin", "PROTFS_PASSCODE=1234", "EMPTY=", "_=/usr/bin/protfs"]
    let fromC = try #require(Self.requestFromC(words, environment, directory: "/work/a b", umask: "0022"))
    let request = try #require(LaunchRequest.decode(fromC))
    #expect(request.words == words)
    #expect(request.surroundings.directory == "/work/a b" && request.surroundings.umask == "0022")
    #expect(request.surroundings.environment == ["PATH=/usr/bin:/bin", "EMPTY=", "_=/usr/bin/protfs"])
    // Byte for byte what Swift sends for the same launch.
    #expect(fromC == request.encoded)
  }

  @Test func garbageIsNoRequest() {
    for bytes in ["", "x", "3:ab\n", "1:ab\n", "99999999999:a\n", "2:ab", "1:a\n"].map({ Array($0.utf8) }) {
      #expect(LaunchRequest.decode(bytes) == nil, "\(bytes)")
    }
  }

  @Test func aLaunchTakesItsPrewarmAndNoOtherLaunchDoes() throws {
    let environment = ["PATH=/usr/bin:/bin", "HOME=/root"]
    let device = Device(root: "/tmp/d")
    func plan(_ words: [String], _ variables: [String] = environment) -> LaunchPlan? {
      let surroundings = LaunchPlan.Surroundings(directory: "/", umask: "0022", environment: variables)
      return AppLaunchCommand.plan(of: LaunchRequest(words: words, surroundings: surroundings), on: device)
    }
    let prewarm = try #require(
      plan(["--device", "/tmp/d", "app", "launch", "--prewarm", "com.example.app", "--", "/bin/true"]))
    #expect(prewarm.prewarm && prewarm.kind == .user && prewarm.command == ["/bin/true"])
    func takes(_ words: [String], _ variables: [String] = environment) -> Bool {
      plan(words, variables).map(prewarm.takes) ?? false
    }
    #expect(takes(["--device", "/tmp/d", "app", "launch", "com.example.app", "--", "/bin/true"]))
    // A launch's options count as what they mean, not as the words that gave them.
    #expect(
      takes(["--device", "/tmp/d", "app", "launch", "--background-time", "30s", "com.example.app", "--", "/bin/true"]))
    // The shell's own notes do not count; the rest of the environment, the options and the command do.
    #expect(
      takes(
        ["--device=/tmp/d", "app", "launch", "com.example.app", "--", "/bin/true"], environment + ["_=x", "SHLVL=2"]))
    #expect(!takes(["--device", "/tmp/d", "app", "launch", "com.example.app", "--", "/bin/true"], ["PATH=/bin"]))
    #expect(!takes(["--device", "/tmp/d", "app", "launch", "--no-mount", "com.example.app", "--", "/bin/true"]))
    #expect(!takes(["--device", "/tmp/d", "app", "launch", "com.example.app", "--", "/bin/false"]))
    // Another device's launch, the system's launches and a passcode's have no plan here: they end a held app.
    #expect(plan(["--device", "/tmp/e", "app", "launch", "com.example.app", "--", "/bin/true"]) == nil)
    #expect(plan(["--device", "/tmp/d", "app", "launch", "--for-fetch", "com.example.app", "--", "/bin/true"]) == nil)
    #expect(
      plan(["--device", "/tmp/d", "app", "launch", "--passcode", "1", "com.example.app", "--", "/bin/true"]) == nil)
    #expect(plan(["--device", "/tmp/d", "app", "status"]) == nil)
  }

  @Test func aRequestThatClaimsNoWordsIsNoRequestAndDoesNotCrash() {
    // A count of 0 words once made the decoder build the range 1...0, which traps.
    #expect(LaunchRequest.decode(Array("1:0\n1:/\n4:0022\n".utf8))?.words == [])
    #expect(LaunchRequest.decode(Array("1:0\n".utf8)) == nil)
  }
}
