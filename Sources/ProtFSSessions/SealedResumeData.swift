import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

/// Resume data as the session service hands it to an app: the engine's resume data, bound to the
/// session and the task it came from, with an HMAC-SHA256 under the device's secret
/// (`.protfs/mode-key`, which authenticates saved modes too, each use under its own tag).
///
/// The app is untrusted (docs/semantics.md §11): what it gives back is believed only when the MAC
/// proves the service made it for this session; even then the service takes no directory from it
/// (the session's own are used) and continues the temp file only when the store still records it
/// for that task (so the same data resumes once).
struct SealedResumeData: Codable, Equatable {
  /// The format's version.
  var protfsResumeData: Int
  /// The session the data was made for.
  var session: String
  /// The task it was made from.
  var task: Int64
  /// The engine's resume data (`DownloadResumeData`'s encoding).
  var data: Data
  /// The MAC, lowercase hex.
  var mac: String

  private static let domain = "protfs resume-data 1"
  private static let version = 1
  /// The most bytes of sealed resume data taken (an app cannot make the service parse megabytes).
  static let maximumSize = 16 * 1024

  /// Seals `data` (made from task `task` of `session`) with `key`.
  static func seal(_ data: Data, session: String, task: Int64, key: ModeKey) -> Data {
    let sealed = SealedResumeData(
      protfsResumeData: version, session: session, task: task, data: data,
      mac: hex(key.mac(domain: domain, message: message(session: session, task: task, data: data))))
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return (try? encoder.encode(sealed)) ?? Data()
  }

  /// The engine's resume data and its task, from bytes an app gave for `session`; throws when they
  /// are not resume data the service made for that session.
  static func open(_ bytes: Data, session: String, key: ModeKey) throws(ProtFSError) -> (
    DownloadResumeData, task: Int64
  ) {
    let invalid = ProtFSError(
      .invalidArgument,
      "The resume data is not valid for the session '\(session)': it was not made by this device's session service for this session.",
      remedy: .advice("pass the bytes that cancel(byProducingResumeData:) of this session produced, unchanged"))
    guard bytes.count <= maximumSize, let sealed = try? JSONDecoder().decode(SealedResumeData.self, from: bytes),
      sealed.protfsResumeData == version, sealed.session == session
    else { throw invalid }
    let expected = key.mac(domain: domain, message: message(session: session, task: sealed.task, data: sealed.data))
    // Compared in constant time: nothing is learnt of the MAC from how long a refusal takes.
    guard let given = unhex(sealed.mac), given.count == expected.count,
      zip(given, expected).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0
    else { throw invalid }
    return (try DownloadResumeData(data: sealed.data), sealed.task)
  }

  private static func message(session: String, task: Int64, data: Data) -> [UInt8] {
    Array(session.utf8) + [0] + Array(String(task).utf8) + [0] + Array(data)
  }

  private static func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
  }

  private static func unhex(_ text: String) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: digits.count, by: 2) {
      guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
      bytes.append(byte)
    }
    return bytes
  }
}
