import Foundation
import ProtFSKit
import Testing

/// A task's response kept as iOS apps keep it: archived with secure coding and read back, and an
/// archive that is not one refused without stopping the app.
@Suite struct URLResponseCodingTests {
  static let url = URL(string: "https://example.com/files/report.zip?token=1")!

  /// A download's response with the fields apps look at.
  static func response() -> HTTPURLResponse {
    HTTPURLResponse(
      url: url, statusCode: 206, httpVersion: "HTTP/1.1",
      headerFields: [
        "Content-Type": "application/zip; charset=utf-8", "Content-Length": "1024", "ETag": "\"v1\"",
        "Content-Disposition": "attachment; filename=\"report.zip\"",
      ])!
  }

  /// `response`'s archive as an XML property list, to change as someone else might.
  static func archiveText(_ response: URLResponse) -> String {
    let archiver = NSKeyedArchiver(requiringSecureCoding: true)
    archiver.outputFormat = .xml
    archiver.encode(response, forKey: NSKeyedArchiveRootObjectKey)
    archiver.finishEncoding()
    return String(decoding: archiver.encodedData, as: UTF8.self)
  }

  /// `text` with the value that follows `<key>KEY</key>` replaced by `element`.
  static func replacing(_ key: String, with element: String, in text: String) throws -> String {
    let keyRange = try #require(text.range(of: "<key>\(key)</key>"))
    let start = try #require(text.range(of: "<", range: keyRange.upperBound..<text.endIndex))
    let close = try #require(text.range(of: "</", range: start.upperBound..<text.endIndex))
    let end = try #require(text.range(of: ">", range: close.upperBound..<text.endIndex))
    return text.replacingCharacters(in: start.lowerBound..<end.upperBound, with: element)
  }

  /// An HTTP response round-trips through `NSKeyedArchiver` with `requiringSecureCoding: true`:
  /// URL, status, header fields, and what they give (MIME type, encoding, length, file name).
  @Test func anHTTPResponseRoundTrips() throws {
    let original = Self.response()
    let data = try NSKeyedArchiver.archivedData(withRootObject: original, requiringSecureCoding: true)
    let decoded = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: HTTPURLResponse.self, from: data))
    #expect(decoded.url == Self.url)
    #expect(decoded.statusCode == 206)
    #expect(decoded.allHeaderFields as? [String: String] == original.allHeaderFields as? [String: String])
    #expect(decoded.value(forHTTPHeaderField: "etag") == "\"v1\"")
    #expect(decoded.mimeType == "application/zip")
    #expect(decoded.textEncodingName == "utf-8")
    #expect(decoded.expectedContentLength == 1024)
    #expect(decoded.suggestedFilename == "report.zip")
    // Read as its superclass, as apps that keep `task.response` (a URLResponse) do.
    let asResponse = try NSKeyedUnarchiver.unarchivedObject(ofClass: URLResponse.self, from: data)
    #expect((asResponse as? HTTPURLResponse)?.statusCode == 206)
  }

  /// A plain `URLResponse` keeps its own MIME type and encoding.
  @Test func aResponseRoundTrips() throws {
    let original = URLResponse(
      url: Self.url, mimeType: "text/plain", expectedContentLength: 5, textEncodingName: "utf-8")
    let data = try NSKeyedArchiver.archivedData(withRootObject: original, requiringSecureCoding: true)
    let decoded = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: URLResponse.self, from: data))
    #expect(decoded.url == Self.url)
    #expect(decoded.mimeType == "text/plain")
    #expect(decoded.textEncodingName == "utf-8")
    #expect(decoded.expectedContentLength == 5)
    #expect(URLResponse.supportsSecureCoding)
  }

  /// Bytes that are no archive, a cut one, and archives whose fields someone changed are refused
  /// with an error; the app goes on.
  @Test func anArchiveThatIsNotOneIsRefused() throws {
    let text = Self.archiveText(Self.response())
    #expect(try NSKeyedUnarchiver.unarchivedObject(ofClass: HTTPURLResponse.self, from: Data(text.utf8)) != nil)
    let badURL = Data([0xFF, 0xFE, 0x00]).base64EncodedString()
    let changed = [
      try Self.replacing("statusCode", with: "<integer>999</integer>", in: text),
      try Self.replacing("statusCode", with: "<string>200</string>", in: text),
      try Self.replacing("URL", with: "<data>\(badURL)</data>", in: text),
      try Self.replacing("URL", with: "<string>https://example.com/</string>", in: text),
      try Self.replacing("fieldCount", with: "<integer>5</integer>", in: text),
      try Self.replacing("fieldCount", with: "<integer>99999999999</integer>", in: text),
      try Self.replacing("fieldCount", with: "<real>1e300</real>", in: text),
      try Self.replacing("expectedContentLength", with: "<integer>-5</integer>", in: text),
    ]
    for archive in changed {
      #expect(throws: (any Error).self) {
        try NSKeyedUnarchiver.unarchivedObject(ofClass: HTTPURLResponse.self, from: Data(archive.utf8))
      }
    }
    // A length past Int64 reads as some length, not a crash.
    let huge = try Self.replacing("expectedContentLength", with: "<real>1e300</real>", in: text)
    _ = try? NSKeyedUnarchiver.unarchivedObject(ofClass: HTTPURLResponse.self, from: Data(huge.utf8))
    let data = Data(text.utf8)
    for garbage in [Data(), Data("not an archive".utf8), data.prefix(data.count / 2), Data(repeating: 0xFF, count: 64)]
    {
      #expect(throws: (any Error).self) {
        try NSKeyedUnarchiver.unarchivedObject(ofClass: HTTPURLResponse.self, from: garbage)
      }
    }
  }
}
