import CProtFSLaunch
import Foundation
import Testing

@testable import ProtFSCLI

/// The request a launch sends to take a prewarmed app is made in two places, the protfs program's
/// C constructor and `PrewarmedLaunch`; the supervisor decodes both the same way.
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
    let request = try #require(PrewarmedLaunch.LaunchRequest.decode(fromC))
    #expect(request.words == words)
    #expect(request.directory == "/work/a b" && request.umask == "0022")
    #expect(request.environment == ["PATH=/usr/bin:/bin", "EMPTY=", "_=/usr/bin/protfs"])
    // Byte for byte what Swift sends for the same launch.
    #expect(fromC == request.encoded)
  }

  @Test func garbageIsNoRequest() {
    for bytes in ["", "x", "3:ab\n", "1:ab\n", "99999999999:a\n", "2:ab", "1:a\n"].map({ Array($0.utf8) }) {
      #expect(PrewarmedLaunch.LaunchRequest.decode(bytes) == nil, "\(bytes)")
    }
  }

  @Test func aLaunchAndItsPrewarmHaveOneKeyAndOtherLaunchesAnother() throws {
    let environment = ["PATH=/usr/bin:/bin", "HOME=/root"]
    func key(_ words: [String], _ variables: [String] = environment) -> PrewarmedLaunch.LaunchKey? {
      PrewarmedLaunch.key(
        of: PrewarmedLaunch.LaunchRequest(words: words, directory: "/", umask: "0022", environment: variables))
    }
    let prewarm = key(["--device", "/tmp/d", "app", "launch", "--prewarm", "com.example.app", "--", "/bin/true"])
    #expect(prewarm != nil)
    #expect(key(["--device", "/tmp/d", "app", "launch", "com.example.app", "--", "/bin/true"]) == prewarm)
    // The shell's own notes do not count; the rest of the environment, the options and the command do.
    #expect(
      key(
        ["--device=/tmp/d", "app", "launch", "com.example.app", "--", "/bin/true"], environment + ["_=x", "SHLVL=2"])
        == prewarm)
    #expect(
      key(["--device", "/tmp/d", "app", "launch", "com.example.app", "--", "/bin/true"], ["PATH=/bin"]) != prewarm)
    #expect(
      key(["--device", "/tmp/d", "app", "launch", "--no-mount", "com.example.app", "--", "/bin/true"]) != prewarm)
    #expect(key(["--device", "/tmp/d", "app", "launch", "com.example.app", "--", "/bin/false"]) != prewarm)
    #expect(key(["--device", "/tmp/e", "app", "launch", "com.example.app", "--", "/bin/true"]) != prewarm)
    // The system's launches and a passcode's have none: they end a held app.
    #expect(key(["--device", "/tmp/d", "app", "launch", "--for-fetch", "com.example.app", "--", "/bin/true"]) == nil)
    #expect(key(["--device", "/tmp/d", "app", "status"]) == nil)
  }
}
