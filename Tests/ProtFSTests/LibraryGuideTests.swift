import Foundation
import ProtFS
import ProtFSFoundation
import ProtFSTestSupport
import Testing

/// docs/library.md's first snippet, compiled and run as written (on a device of the test's own),
/// and the errors a file manager gives on a device or container not yet made.
@Suite struct LibraryGuideTests {
  /// The first ```swift block of docs/library.md, without its imports.
  static func guideSnippet() throws -> [String] {
    let guide = try String(contentsOfFile: RepositoryLayout.packageRoot + "/docs/library.md", encoding: .utf8)
    let block = try #require(guide.components(separatedBy: "```swift\n").dropFirst().first)
    let code = try #require(block.components(separatedBy: "```").first)
    return code.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
      .filter { !$0.hasPrefix("import ") && !$0.isEmpty }
  }

  /// This file's copy of the snippet: the lines between its two markers, dedented, with the test's
  /// device root where the guide has "/tmp/device".
  static func copyInThisFile() throws -> [String] {
    let source = try String(contentsOfFile: #filePath, encoding: .utf8)
    // Put together, so that only the markers themselves are found.
    let marker = "// docs/library.md, first snippet: "
    let begin = marker + "begin", end = marker + "end"
    let inside = try #require(
      source.components(separatedBy: begin).dropFirst().first?.components(separatedBy: end).first)
    return inside.split(separator: "\n").map { String($0.drop { $0 == " " }) }.filter { !$0.isEmpty }
      .map { $0.replacingOccurrences(of: "Device(root: root)", with: "Device(root: \"/tmp/device\")") }
  }

  @Test func theGuidesFirstSnippetIsThisTestsCode() throws {
    // swift-format breaks and indents lines its own way: compare the code without white space.
    let code = { (lines: [String]) in lines.joined().filter { !$0.isWhitespace } }
    let guide = try Self.guideSnippet(), copy = try Self.copyInThisFile()
    #expect(code(guide) == code(copy), "\(guide)\n\(copy)")
  }

  @Test func theGuidesFirstSnippetRuns() throws {
    let t = try TestDevice(containers: [])
    let root = t.directory + "/guide-device"
    // docs/library.md, first snippet: begin
    // The device and the app's container in it, as `protfs init com.example.app` makes them: until
    // they exist, every call below throws an error that says which is missing.
    let device = Device(root: root)
    let bundleID = try BundleID("com.example.app")
    try device.createContainer(bundleID)
    // The app's file manager: its container's directories, as FileManager.default gives them (with
    // no bundleID, the app that `protfs app` runs this program as).
    let app = ProtectedFileManager(device: device, bundleID: bundleID)
    let documents = app.urls(for: .documentDirectory, in: .userDomainMask)[0]
    try app.createDirectory(
      at: documents.appendingPathComponent("Downloads"), withIntermediateDirectories: true,
      attributes: [.protectionKey: FileProtectionType.none])
    let url = documents.appendingPathComponent("a.pdf")
    try Data("%PDF-1.7".utf8).write(to: url, options: [.atomic, .completeFileProtection], using: app)
    print(try app.attributesOfItem(atPath: url.path)[.protectionKey] ?? "no class")  // NSFileProtectionComplete
    try app.setAttributes([.protectionKey: FileProtectionType.completeUnlessOpen], ofItemAtPath: url.path)
    try app.copyItem(at: url, to: documents.appendingPathComponent("b.pdf"))
    try app.removeItem(at: url)
    // docs/library.md, first snippet: end
    let copy = documents.appendingPathComponent("b.pdf").path
    #expect(try app.fileProtection(ofItemAtPath: copy) == .completeUnlessOpen)
    #expect(try app.fileProtection(ofItemAtPath: documents.appendingPathComponent("Downloads").path) == .none)
    #expect(!app.fileExists(atPath: url.path))
  }

  @Test func aCallOnADeviceOrContainerNotYetMadeSaysWhatIsMissing() throws {
    let t = try TestDevice(containers: [])
    let root = t.directory + "/new-device"
    let bundleID = try BundleID("com.example.app")
    let device = Device(root: root)
    let app = ProtectedFileManager(device: device, bundleID: bundleID)
    let documents = app.urls(for: .documentDirectory, in: .userDomainMask)[0]
    let url = documents.appendingPathComponent("a.pdf")
    /// The message of the error `body` throws.
    func message(_ body: () throws -> Void) -> String {
      do {
        try body()
        return "no error"
      } catch {
        return (error as NSError).localizedDescription
      }
    }
    let uninitialised = message { try Data("x".utf8).write(to: url, using: app) }
    #expect(uninitialised.hasPrefix("The device '\(root)' has not been initialised"), "\(uninitialised)")
    try device.initialize()
    for call in [
      { try Data("x".utf8).write(to: url, using: app) },
      { _ = try app.attributesOfItem(atPath: documents.path) },
      { try app.createDirectory(at: documents, withIntermediateDirectories: false) },
    ] as [() throws -> Void] {
      let noContainer = message(call)
      #expect(
        noContainer.hasPrefix("The app com.example.app has no container on the device '\(root)'"), "\(noContainer)")
    }
    // Once made, the same calls work.
    try device.createContainer(bundleID)
    try Data("x".utf8).write(to: url, using: app)
    #expect(app.fileExists(atPath: url.path))
  }
}
