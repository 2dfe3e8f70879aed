import Foundation
import ProtFS
import ProtFSSystem

extension ProtFSError.Code {
  /// Resume data that continues nothing of the session's: not resume data, or naming a temp file,
  /// a URL or a byte count that are not those of a download the session keeps
  /// (`NSURLErrorCannotOpenFile` in the app).
  package static let resumeDataRefused = ProtFSError.Code("resumeDataRefused")
}

/// Resume data in Apple's format, as iOS 12 and later hand it out: an `NSKeyedArchiver` binary
/// property list whose root object is a dictionary with Apple's keys. Apps read it and rewrite it
/// (the widely copied fixes for iOS 10's resume data; download managers that look for the partial
/// file by `NSURLSessionResumeInfoTempFileName`), so it is not sealed: whoever takes it back checks
/// what it names against what it keeps (docs/semantics.md §15).
///
/// Read within bounds from any of the forms iOS has used: a keyed archive (iOS 12 and later), or
/// the plain dictionary of iOS 8 to 11 in a binary or XML property list, version 1 naming the
/// file by its path (`NSURLSessionResumeInfoLocalPath`), version 2 by its name. The binary forms
/// are read in place (`BinaryPropertyList`: no object graph is expanded, so no archive can make
/// the reader loop or grow), an XML one through `BoundedPropertyList`.
package struct AppleResumeData: Sendable, Equatable {
  /// The URL the download was made with (http or https).
  package var url: URL
  /// How many bytes the temp file holds.
  package var bytesReceived: Int64
  /// The temp file's name, `CFNetworkDownload_XXXXXX.tmp` (no directory).
  package var temporaryFileName: String
  /// The entity's `ETag`, sent back as `If-Range`.
  package var entityTag: String?
  /// The entity's `Last-Modified`, sent back as `If-Range` when there is no `ETag`.
  package var serverDownloadDate: String?
  /// The request's header fields (kept in the archived current and original request).
  package var headers: [String: String]

  /// The most bytes of resume data read; Apple's are a few kilobytes.
  package static let maximumSize = 64 * 1024
  /// The most entries of a dictionary in it read (Apple's have about a dozen; a request's header
  /// fields are a few).
  private static let maximumEntries = 256

  /// Apple's keys.
  package enum Key {
    package static let version = "NSURLSessionResumeInfoVersion"
    package static let url = "NSURLSessionDownloadURL"
    package static let bytesReceived = "NSURLSessionResumeBytesReceived"
    package static let temporaryFileName = "NSURLSessionResumeInfoTempFileName"
    package static let localPath = "NSURLSessionResumeInfoLocalPath"
    package static let entityTag = "NSURLSessionResumeEntityTag"
    package static let serverDownloadDate = "NSURLSessionResumeServerDownloadDate"
    package static let currentRequest = "NSURLSessionResumeCurrentRequest"
    package static let originalRequest = "NSURLSessionResumeOriginalRequest"
    /// In an archived request: its URL, method and header fields.
    static let requestURL = "URL"
    static let requestMethod = "HTTPMethod"
    static let requestHeaders = "allHTTPHeaderFields"
  }

  /// Creates resume data.
  package init(
    url: URL, bytesReceived: Int64, temporaryFileName: String, entityTag: String? = nil,
    serverDownloadDate: String? = nil, headers: [String: String] = [:]
  ) {
    self.url = url
    self.bytesReceived = bytesReceived
    self.temporaryFileName = temporaryFileName
    self.entityTag = entityTag
    self.serverDownloadDate = serverDownloadDate
    self.headers = headers
  }

  // MARK: Writing

  /// The bytes `cancel(byProducingResumeData:)` hands out: version 2, the URL, the byte count, the
  /// temp file's name, the validators, and the current and original request, each itself a keyed
  /// archive (of a dictionary with the request's URL, method and header fields: this Foundation
  /// has no `NSURLRequest` to archive, and an app that unarchives one finds none, as it skips a
  /// request it cannot read).
  package var archived: Data {
    let request: NSDictionary = [
      Key.requestURL: url.absoluteString, Key.requestMethod: "GET",
      Key.requestHeaders: NSDictionary(dictionary: headers),
    ]
    let archivedRequest = Self.archive(request)
    let root = NSMutableDictionary()
    root[Key.version] = NSNumber(value: 2)
    root[Key.url] = url.absoluteString
    root[Key.bytesReceived] = NSNumber(value: bytesReceived)
    root[Key.temporaryFileName] = temporaryFileName
    root[Key.currentRequest] = archivedRequest
    root[Key.originalRequest] = archivedRequest
    if let entityTag { root[Key.entityTag] = entityTag }
    if let serverDownloadDate { root[Key.serverDownloadDate] = serverDownloadDate }
    return Self.archive(root)
  }

  private static func archive(_ object: NSDictionary) -> Data {
    // A dictionary of strings, numbers and data always archives; nothing is lost by the fallback.
    (try? NSKeyedArchiver.archivedData(withRootObject: object, requiringSecureCoding: true)) ?? Data()
  }

  // MARK: Reading

  /// The resume data in `data`, or a refusal saying why it is not resume data protfs continues.
  package init(_ data: Data) throws(ProtFSError) {
    let fields: [String: Value]
    switch Self.dictionary(Array(data)) {
    case .failure(let refusal): throw Self.refusal(refusal.reason)
    case .success(let found): fields = found
    }
    guard case .string(let text)? = fields[Key.url], let url = URL(string: text),
      ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
    else { throw Self.refusal("it names no http or https URL under \(Key.url)") }
    guard case .integer(let bytes)? = fields[Key.bytesReceived], bytes >= 0 else {
      throw Self.refusal("it has no byte count of zero or more under \(Key.bytesReceived)")
    }
    let name: String
    if case .string(let given)? = fields[Key.temporaryFileName] {
      name = given
    } else if case .string(let path)? = fields[Key.localPath] {
      name = String(path.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
    } else {
      throw Self.refusal("it names no temp file under \(Key.temporaryFileName)")
    }
    guard name.hasPrefix("CFNetworkDownload_"), name.hasSuffix(".tmp"), !name.contains("/"), name.utf8.count <= 255
    else { throw Self.refusal("its temp file '\(name.prefix(80))' is not a download's CFNetworkDownload_XXXXXX.tmp") }
    func string(_ key: String) -> String? {
      if case .string(let value)? = fields[key] { return value }
      return nil
    }
    var headers: [String: String] = [:]
    for key in [Key.currentRequest, Key.originalRequest] {
      guard case .data(let bytes)? = fields[key], case .success(let request) = Self.dictionary(bytes),
        case .strings(let found)? = request[Key.requestHeaders]
      else { continue }
      headers = found
      break
    }
    self.init(
      url: url, bytesReceived: bytes, temporaryFileName: name, entityTag: string(Key.entityTag),
      serverDownloadDate: string(Key.serverDownloadDate), headers: headers)
  }

  /// A value of the root dictionary: what the keys above hold.
  enum Value: Equatable {
    case string(String)
    case integer(Int64)
    case data([UInt8])
    /// A dictionary of strings to strings (a request's header fields).
    case strings([String: String])
    /// Anything else, not read.
    case other
  }

  /// Why bytes are not resume data.
  struct Refusal: Error {
    var reason: String
  }

  /// The error that refuses resume data, saying why.
  package static func refusal(_ reason: String) -> ProtFSError {
    ProtFSError(
      .resumeDataRefused, "The resume data cannot be used: \(reason).",
      remedy: .advice("pass the resume data cancel(byProducingResumeData:) or the failed task's error gave"))
  }

  /// The root dictionary of `bytes`, a property list (binary, keyed archive or not; or XML).
  static func dictionary(_ bytes: [UInt8]) -> Result<[String: Value], Refusal> {
    guard bytes.count <= maximumSize else {
      return .failure(Refusal(reason: "it is larger than \(maximumSize) bytes"))
    }
    if bytes.starts(with: Array("bplist00".utf8)) {
      return bytes.withUnsafeBytes { raw in
        guard let plist = BinaryPropertyList(raw) else {
          return .failure(Refusal(reason: "it is a damaged binary property list"))
        }
        return binaryDictionary(plist)
      }
    }
    switch BoundedPropertyList.parse(bytes, limits: .init(bytes: maximumSize)) {
    case .failure(let refusal):
      return .failure(Refusal(reason: "it is not a property list protfs reads: \(refusal.reason)"))
    case .success(let value):
      guard let plain = value as? [String: Any], plain["$archiver"] == nil, plain.count <= maximumEntries else {
        return .failure(Refusal(reason: "it is not a dictionary of Apple's resume data keys"))
      }
      var fields: [String: Value] = [:]
      for (key, value) in plain {
        switch value {
        case let text as String: fields[key] = .string(text)
        case let data as Data: fields[key] = .data(Array(data))
        case let number as NSNumber where !(number is Bool): fields[key] = .integer(number.int64Value)
        case let strings as [String: String]: fields[key] = .strings(strings)
        default: fields[key] = .other
        }
      }
      return .success(fields)
    }
  }

  /// The root dictionary of a binary property list: a keyed archive's root object (its `NS.keys`
  /// and `NS.objects`, each one `UID` into `$objects`), or the top dictionary itself.
  private static func binaryDictionary(_ plist: BinaryPropertyList) -> Result<[String: Value], Refusal> {
    guard let top = plist.dictionary(plist.top) else {
      return .failure(Refusal(reason: "its top object is not a dictionary"))
    }
    guard let archiver = plist.value(top, "$archiver") else {
      return entries(plist, top, depth: 0, resolve: { $0 })
    }
    guard plist.isString(archiver, "NSKeyedArchiver"), let objects = plist.value(top, "$objects").flatMap(plist.array),
      let root = plist.value(top, "$top").flatMap(plist.dictionary).flatMap({ plist.value($0, "root") })
        .flatMap(plist.uid).flatMap({ plist.element(objects, $0) })
    else { return .failure(Refusal(reason: "it is not an NSKeyedArchiver archive with a root object")) }
    let resolve: (Int) -> Int? = { reference in plist.uid(reference).flatMap { plist.element(objects, $0) } }
    return archivedDictionary(plist, root, depth: 0, resolve: resolve)
      .map { .success($0) } ?? .failure(Refusal(reason: "its root object is not a dictionary"))
  }

  /// A plain dictionary's entries; values are what `resolve` makes of each reference. `depth`: how
  /// far down the root dictionary it is (0 or 1: nothing deeper is followed, so no reference that
  /// leads back to its own dictionary sends the reader round).
  private static func entries(
    _ plist: BinaryPropertyList, _ dictionary: BinaryPropertyList.Collection, depth: Int, resolve: (Int) -> Int?
  ) -> Result<[String: Value], Refusal> {
    guard dictionary.count <= maximumEntries else {
      return .failure(Refusal(reason: "a dictionary in it has more than \(maximumEntries) entries"))
    }
    var fields: [String: Value] = [:]
    for index in 0..<dictionary.count {
      guard let key = plist.element(dictionary, index).flatMap(plist.string),
        let value = plist.element(dictionary, dictionary.count + index)
      else { continue }
      fields[key] = self.value(plist, value, depth: depth, resolve: resolve)
    }
    return .success(fields)
  }

  /// An archived `NSDictionary` (`NS.keys`, `NS.objects`) at `reference`, its keys and values resolved.
  private static func archivedDictionary(
    _ plist: BinaryPropertyList, _ reference: Int, depth: Int, resolve: (Int) -> Int?
  ) -> [String: Value]? {
    guard let object = plist.dictionary(reference), let keys = plist.value(object, "NS.keys").flatMap(plist.array),
      let values = plist.value(object, "NS.objects").flatMap(plist.array), keys.count == values.count,
      keys.count <= maximumEntries
    else { return nil }
    var fields: [String: Value] = [:]
    for index in 0..<keys.count {
      guard let key = plist.element(keys, index).flatMap(resolve).flatMap({ string(plist, $0) }),
        let value = plist.element(values, index).flatMap(resolve)
      else { continue }
      fields[key] = self.value(plist, value, depth: depth, resolve: resolve)
    }
    return fields
  }

  /// A string object, or an archived `NSString`/`NSMutableString` (`NS.string`).
  private static func string(_ plist: BinaryPropertyList, _ reference: Int) -> String? {
    plist.string(reference)
      ?? plist.dictionary(reference).flatMap { plist.value($0, "NS.string") }
      .flatMap(plist.string)
  }

  /// The value at `reference`: a string, an integer, data (or an archived `NSData`'s `NS.data`), a
  /// dictionary of strings one level down; anything else is `.other`.
  private static func value(_ plist: BinaryPropertyList, _ reference: Int, depth: Int, resolve: (Int) -> Int?)
    -> Value
  {
    if let text = string(plist, reference) { return .string(text) }
    if let number = plist.integer(reference) { return .integer(number) }
    if let bytes = plist.data(reference) { return .data(bytes) }
    guard depth == 0, let object = plist.dictionary(reference) else { return .other }
    if let bytes = plist.value(object, "NS.data").flatMap(plist.data) { return .data(bytes) }
    // A dictionary of strings: an archived one's values are references one UID away, a plain one's
    // are in place. Nothing deeper is followed.
    let inner: [String: Value]?
    if plist.value(object, "NS.keys") != nil {
      inner = archivedDictionary(plist, reference, depth: 1, resolve: resolve)
    } else if case .success(let plain) = entries(plist, object, depth: 1, resolve: { $0 }) {
      inner = plain
    } else {
      inner = nil
    }
    guard let inner else { return .other }
    var strings: [String: String] = [:]
    for (key, value) in inner {
      guard case .string(let text) = value else { return .other }
      strings[key] = text
    }
    return .strings(strings)
  }
}
