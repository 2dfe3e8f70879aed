import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSSystem
import Testing

/// A download task's request headers reach the session service's request.
@Suite struct URLSessionHeadersTests {
  @Test func aDownloadRequestsHeadersAndTheConfigurationsGoToTheBackend() {
    let backend = FakeSessionBackend()
    let configuration = URLSessionConfiguration.background(withIdentifier: backend.identifier)
    configuration.httpAdditionalHeaders = ["X-App": "1", "Authorization": "ignored"]
    let session = URLSession(
      configuration: configuration, delegate: RecordingDelegate(), delegateQueue: nil, backend: backend)
    var request = URLRequest(url: URL(string: "http://example.test/file.bin")!)
    request.setValue("Bearer t", forHTTPHeaderField: "Authorization")
    let task = session.downloadTask(with: request)
    let sent = backend.store.withLock { $0.tasks.first?.request.headers } ?? []
    #expect(sent.contains(SessionHeader(name: "Authorization", value: "Bearer t")))
    #expect(sent.contains(SessionHeader(name: "X-App", value: "1")))
    #expect(!sent.contains { $0.value == "ignored" })
    #expect(task.originalRequest?.value(forHTTPHeaderField: "Authorization") == "Bearer t")
  }

  @Test func aDownloadRequestsMethodAndBodyGoToTheBackendAndGetSendsNoBody() {
    let backend = FakeSessionBackend()
    let session = URLSession(
      configuration: .background(withIdentifier: backend.identifier), delegate: RecordingDelegate(),
      delegateQueue: nil, backend: backend)
    var post = URLRequest(url: URL(string: "http://example.test/report")!)
    post.httpMethod = "post"
    post.httpBody = Data("{\"q\":1}".utf8)
    _ = session.downloadTask(with: post)
    var get = URLRequest(url: URL(string: "http://example.test/file.bin")!)
    get.httpBody = Data("dropped".utf8)
    _ = session.downloadTask(with: get)
    let sent = backend.store.withLock { $0.tasks.map(\.request) }
    #expect(sent.map(\.method) == ["POST", "GET"])
    #expect(sent.first?.body == Data("{\"q\":1}".utf8))
    #expect(sent.last?.body == nil)
  }
}
