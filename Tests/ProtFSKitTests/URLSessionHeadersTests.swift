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
}
