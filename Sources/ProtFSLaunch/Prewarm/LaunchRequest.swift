import Foundation
import ProtFSSystem

/// What a launch sends to take a prewarmed app (`PrewarmServer`): its words (the command line
/// after the program), its working directory, its umask (as `/proc/self/status` shows it) and its
/// environment, secrets left out. Encoded as entries `LENGTH:BYTES\n`: the number of words, the
/// words, the directory, the umask, then the environment's entries. The protfs program's C
/// constructor (`CProtFSLaunch`) sends the same bytes.
///
/// The words are the launcher's own syntax: the server hands them to the function it was given,
/// which makes a `LaunchPlan` of them, and compares plans.
public struct LaunchRequest: Sendable, Equatable {
  /// The command line after the program.
  public var words: [String]
  /// Where the launch was made.
  public var surroundings: LaunchPlan.Surroundings

  /// A request of `words` made from `surroundings`.
  public init(words: [String], surroundings: LaunchPlan.Surroundings) {
    self.words = words
    self.surroundings = surroundings
  }

  /// The most bytes a request may have.
  package static let limit = 1 << 20

  /// The request as it is sent.
  package var encoded: [UInt8] {
    var bytes: [UInt8] = []
    let entries =
      [String(words.count)] + words + [surroundings.directory, surroundings.umask] + surroundings.environment
    for entry in entries {
      bytes += Array("\(entry.utf8.count):".utf8) + Array(entry.utf8) + [0x0A]
    }
    return bytes
  }

  /// The request `bytes` encode, or nil when they are not one.
  package static func decode(_ bytes: [UInt8]) -> LaunchRequest? {
    var entries: [String] = []
    var index = 0
    while index < bytes.count {
      guard let colon = bytes[index...].firstIndex(of: UInt8(ascii: ":")), colon - index <= 8,
        let length = Int(String(decoding: bytes[index..<colon], as: UTF8.self)), length >= 0,
        colon + 1 + length < bytes.count, bytes[colon + 1 + length] == 0x0A,
        let entry = String(validating: bytes[(colon + 1)..<(colon + 1 + length)], as: UTF8.self)
      else { return nil }
      entries.append(entry)
      index = colon + 2 + length
    }
    guard let count = entries.first.flatMap({ Int($0) }), count >= 0, entries.count >= count + 3 else { return nil }
    return LaunchRequest(
      words: Array(entries[1..<(count + 1)]),
      surroundings: LaunchPlan.Surroundings(
        directory: entries[count + 1], umask: entries[count + 2], environment: Array(entries[(count + 3)...])))
  }
}
