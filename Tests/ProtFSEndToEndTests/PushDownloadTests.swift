import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSTestSupport
import Testing

/// Examples/PushDownloader end to end: a suspended app is woken by a silent push carrying a URL,
/// starts a background download of it and completes the push; the session service downloads the
/// file, and the app (woken again for the session's events if it was suspended meanwhile) moves it
/// into Documents.
@Suite(.serialized, .timeLimit(.minutes(2))) struct PushDownloadTests {
  @Test func aSilentPushStartsABackgroundDownloadThatLandsInDocuments() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(200_000)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .normal)
    defer { server.stop() }
    let example = try d.installExample("PushDownloader")
    defer { d.endAppAndSessionService() }
    let app = try d.launch(["--suspend-after", "200ms"], [example])
    defer { app.stop() }
    #expect(await app.line(containing: "launched") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"), "\(d.record())")
    let payload = d.scripts + "/new-content.json"
    let url = server.url("issue-42.bin").absoluteString
    try Data(#"{"aps": {"content-available": 1}, "url": "\#(url)"}"#.utf8).write(to: URL(fileURLWithPath: payload))
    #expect(try await d.protfs(["app", "push", AppDevice.bundle, payload]).status == 0)
    #expect(await app.line(containing: "push: downloading issue-42.bin") != nil, "\(app.output)")
    let documents = d.t.containerPath(AppDevice.bundle, "Documents/issue-42.bin")
    let moved = await app.line(containing: "downloaded ", timeout: 60)
    #expect(moved?.0.hasSuffix("Documents/issue-42.bin") == true, "\(app.output)")
    #expect(FileManager.default.contents(atPath: documents) == Data(body))
    #expect(await d.waitForState("suspended"), "\(d.record())")
  }
}
