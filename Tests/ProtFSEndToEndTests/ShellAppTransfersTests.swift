import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A shell app (below `protfs app launch`, as the app user) starts, lists and follows its own
/// background downloads (one not before a time it gives) and uploads through the session service,
/// and nothing else.
@Suite(.serialized, .timeLimit(.minutes(3))) struct ShellAppTransfersTests {
  /// The app: one download and one upload, each followed to its end, then what it may not do.
  static let script = #"""
    #!/bin/sh
    P="$PROTFS"
    cd "$HOME" || exit 1
    id=$("$P" download --detach --description nightly --earliest-begin 1s "$1" 2>&1) || { echo "download-failed $id"; exit 1; }
    echo "started $id"
    "$P" tasks wait "$id"; echo "waited $?"
    echo "listed $("$P" tasks --json | tr -d '\n ')"
    "$P" tasks events --session com.example.app.background --json | while read -r line; do echo "event $line"; done
    location=$("$P" tasks events --session com.example.app.background | sed -n 's/.*didFinishDownloadingTo //p')
    mv "$location" Documents/report.bin && echo "moved"
    printf 'hello, upload' > Documents/up.txt
    up=$("$P" upload --detach -X POST --from Documents/up.txt "$2" 2>&1) || { echo "upload-failed $up"; exit 1; }
    "$P" tasks wait "$up"; echo "uploaded $?"
    "$P" download --detach --bundle com.example.other "$1" 2>&1 | sed 's/^/other: /'
    "$P" download "$1" 2>&1 | sed 's/^/foreground: /'
    "$P" tasks cancel 999999 2>&1 | sed 's/^/unknown: /'
    echo done
    while read -r line <&3; do :; done
    """#

  @Test func aShellAppStartsListsAndFollowsItsOwnTransfersAndNoOneElses() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endAppAndSessionService() }
    let body = DownloadFixture.bytes(300_000)
    let downloads = try FaultServer(body: body, entityTag: "\"s1\"", mode: .normal)
    defer { downloads.stop() }
    let uploads = try UploadServer()
    defer { uploads.stop() }
    let script = try d.script("transfers.sh", Self.script)
    let asked = Date()
    let app = try d.launch(
      [], [script, downloads.url("report.bin").absoluteString, uploads.url("upload").absoluteString])
    defer { app.stop() }
    #expect(await app.line(containing: "done", timeout: 60) != nil, "\(app.output)")
    let output = app.output
    let started = try #require(output.first { $0.hasPrefix("started ") }, "\(output)")
    let id = try #require(Int64(started.dropFirst("started ".count)), "\(output)")
    #expect(output.contains("waited 0"), "\(output)")
    // The listing is the app's own tasks, from the service.
    let listed = try #require(output.first { $0.hasPrefix("listed ") })
    let tasks = try JSONSerialization.jsonObject(with: Data(listed.dropFirst("listed ".count).utf8)) as? [[String: Any]]
    #expect(tasks?.first?["id"] as? Int == Int(id), "\(listed)")
    #expect(tasks?.first?["taskDescription"] as? String == "nightly")
    #expect(tasks?.first?["state"] as? String == "completed")
    // Begun no sooner than the app asked (`--earliest-begin 1s`: earliestBeginDate).
    #expect(tasks?.first?["earliestBeginDate"] is String, "\(listed)")
    #expect((downloads.requests.first?.receivedAt ?? .distantPast) >= asked.addingTimeInterval(1))
    #expect(output.contains { $0.hasPrefix("event ") && $0.contains("didFinishDownloadingTo") }, "\(output)")
    // The app moved the handed-over file into its Documents.
    #expect(output.contains("moved"), "\(output)")
    let moved = d.t.containerPath(AppDevice.bundle, "Documents/report.bin")
    #expect(FileManager.default.contents(atPath: moved) == Data(body))
    // The upload went out as a POST of the file's bytes.
    #expect(output.contains("uploaded 0"), "\(output)")
    #expect(uploads.requests.first?.method == "POST")
    #expect(uploads.requests.first?.received == "hello, upload".utf8.count)
    // What it may not do: another app's transfers, a download in its own process, a task not its own.
    #expect(
      output.contains { $0.hasPrefix("other: ") && $0.contains("cannot start transfers for 'com.example.other'") })
    #expect(output.contains { $0.hasPrefix("foreground: ") && $0.contains("add --detach") }, "\(output)")
    #expect(output.contains { $0.hasPrefix("unknown: ") && $0.contains("no download task 999999") }, "\(output)")
    // Every task is the app's session's.
    let store = try DownloadStore(path: d.t.device.downloadStorePath)
    #expect(
      try store.tasks().map(\.sessionIdentifier) == [
        "\(AppDevice.bundle).background", "\(AppDevice.bundle).background",
      ])
  }
}
