import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

extension DownloadCommand {
  /// How many requests `download` records before starting them: a small first chunk gets the
  /// transfers going, larger ones after it keep the store's transactions few.
  package static let firstChunk = 32
  package static let chunk = 512

  /// The URLs of one `download` turned into requests a chunk at a time, as tasks are made, so that
  /// a long list starts at once. Each bad URL is one task's error (printed, and kept in
  /// `rejected`); the others go ahead. A URL given twice is downloaded once.
  struct RequestList {
    /// The URLs not read yet, as given.
    private var remaining: ArraySlice<String>
    /// The URLs read so far, normalised.
    private var seen = Set<String>()
    /// What every request of the run has in common.
    private let template: DownloadRequest
    /// The invocation whose spelling describes a rejected URL's error.
    private let invocation: Invocation
    /// The URLs that did not become requests.
    private(set) var rejected: [Rejected] = []

    /// The requests of `texts`, into `configuration`'s destination with `headers` and what the
    /// options `--sha256`, `--description` and `--earliest-begin` give.
    init(
      _ invocation: Invocation, texts: [String], configuration: DownloadSessionConfiguration,
      headers: [UploadHeader]
    ) throws {
      self.invocation = invocation
      remaining = texts[...]
      // The URL is each request's own; this one is replaced.
      var template = DownloadRequest(
        url: URL(fileURLWithPath: "/"), destinationDirectory: configuration.destinationDirectory,
        expectedSHA256: invocation.value(DownloadCommand.sha256)?.lowercased(),
        taskDescription: invocation.value(DownloadCommand.description), headers: headers)
      template.earliestBegin = try DownloadCommand.earliestBegin(invocation)
      self.template = template
    }

    /// Up to `count` more requests; fewer only at the end of the list.
    mutating func next(_ count: Int) -> [DownloadRequest] {
      var requests: [DownloadRequest] = []
      while requests.count < count, let text = remaining.popFirst() {
        switch DownloadRequest.url(from: text) {
        case .success(let url):
          guard seen.insert(url.absoluteString).inserted else { continue }
          var request = template
          request.url = url
          requests.append(request)
        case .failure(let error):
          Console.err("Error: \(invocation.describe(error))")
          rejected.append(Rejected(url: text, error: invocation.describe(error)))
        }
      }
      return requests
    }
  }

  /// A URL refused before it became a task.
  struct Rejected: Encodable {
    /// The URL as given.
    var url: String
    /// Why, with its remedy.
    var error: String
  }
}
