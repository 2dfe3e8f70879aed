import Foundation
import ProtFSKit
import Testing

/// A task's error kept with NSKeyedArchiver, as download managers keep it: Foundation on Linux
/// traps archiving an NSError (in `NSError.hash`); ProtFSKit's overloads archive it and give it back.
struct NSErrorCodingTests {
  @Test func anNSErrorArchivesAndComesBackWithItsUserInfo() throws {
    let url = URL(string: "https://example.com/big.iso")!
    let underlying = NSError(domain: NSPOSIXErrorDomain, code: Int(EPERM))
    let error = NSError(
      domain: NSURLErrorDomain, code: NSURLErrorCancelled,
      userInfo: [
        NSLocalizedDescriptionKey: "cancelled", NSURLErrorFailingURLErrorKey: url,
        NSURLSessionDownloadTaskResumeData: Data([1, 2, 3]), NSUnderlyingErrorKey: underlying,
        NSURLErrorBackgroundTaskCancelledReasonKey: NSURLErrorCancelledReasonUserForceQuitApplication,
        "handler": { () -> Void in },
      ])
    // As Tiercel writes it.
    let data = try NSKeyedArchiver.archivedData(withRootObject: (error as NSError), requiringSecureCoding: true)
    let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: NSError.self, from: data))
    #expect(back.domain == NSURLErrorDomain && back.code == NSURLErrorCancelled)
    #expect(back.localizedDescription == "cancelled")
    #expect(back.userInfo[NSURLErrorFailingURLErrorKey] as? URL == url)
    #expect(back.userInfo[NSURLSessionDownloadTaskResumeData] as? Data == Data([1, 2, 3]))
    #expect(
      back.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int
        == NSURLErrorCancelledReasonUserForceQuitApplication)
    let inner = try #require(back.userInfo[NSUnderlyingErrorKey] as? NSError)
    #expect(inner.domain == NSPOSIXErrorDomain && inner.code == Int(EPERM))
    // What an archive cannot hold is left out, as Apple's archiver refuses it.
    #expect(back.userInfo["handler"] == nil)
  }

  @Test func dataThatHoldsNoErrorIsRefused() throws {
    let other = try NSKeyedArchiver.archivedData(
      withRootObject: NSDictionary(dictionary: ["a": "b"]), requiringSecureCoding: true)
    #expect(throws: (any Error).self) { try NSKeyedUnarchiver.unarchivedObject(ofClass: NSError.self, from: other) }
    #expect(throws: (any Error).self) {
      try NSKeyedUnarchiver.unarchivedObject(ofClass: NSError.self, from: Data("x".utf8))
    }
  }
}
