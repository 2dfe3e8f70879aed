import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// What a user meets at the command line (issue 64): the default device, errors in protfs's own
/// words, both spellings of a bundle id, help's format flags, `ls` without a path, and passcodes
/// given where other users see them.
@Suite struct EverydayCLITests {
  static let app = "com.example.app"

  /// A regular file given as the device: protfs's own sentence naming it, for init and status alike.
  @Test func aFileAsTheDeviceIsNamedInOurOwnWords() async throws {
    let t = try TestDevice(initialize: false)
    let file = t.directory + "/plain"
    try "x".write(toFile: file, atomically: false, encoding: .utf8)
    for command in [["init", Self.app], ["status"], ["init-cache", Self.app]] {
      let result = try await Protfs.run(["--device", file] + command)
      #expect(result.status == 1, "\(command): \(result)")
      #expect(
        result.stderr.contains(
          "The device path '\(file)' is a file, not a device directory; give --device a directory"), "\(result)")
      #expect(!result.stderr.contains("could not be completed") && !result.stderr.contains(".."), "\(result)")
      #expect(!result.stderr.contains("not been initialised"), "\(result)")
    }
    let below = try await Protfs.run(["--device", file + "/device", "init", Self.app])
    #expect(below.status == 1, "\(below)")
    #expect(below.stderr.contains("Cannot create the device directory '\(file)/device': Not a directory."), "\(below)")
  }
}
