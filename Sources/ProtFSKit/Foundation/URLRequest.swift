import Foundation
import ProtFSSessions

/// A request, as Foundation's `URLRequest`: a URL, a method and header fields. Linux's Foundation
/// declares it in FoundationNetworking, which a ProtFSKit program does not import.
public struct URLRequest: Sendable, Equatable, Hashable {
  /// The request's URL.
  public var url: URL?
  /// The HTTP method; GET when nil was set, as Foundation.
  public var httpMethod: String? {
    get { method }
    set { method = newValue?.uppercased() ?? "GET" }
  }
  /// The time an attempt may stay idle, seconds (60 by default).
  public var timeoutInterval: TimeInterval
  /// Whether the request may use a cellular network (kept; there is none here).
  public var allowsCellularAccess = true
  /// How the request uses the URL cache (kept: there is no cache here, every request loads).
  public var cachePolicy = CachePolicy.useProtocolCachePolicy
  /// The body (a background session refuses data bodies: upload from a file instead).
  public var httpBody: Data?
  /// A stream the body is read from instead (`httpBody` set clears it, and it clears `httpBody`);
  /// sent chunked, its length unknown. A data task reads it; an upload of a streamed request asks
  /// its delegate's `needNewBodyStream` instead, as Foundation.
  public var httpBodyStream: InputStream? {
    get { bodyStream?.stream }
    set { bodyStream = newValue.map(StreamBox.init) }
  }
  private var bodyStream: StreamBox?
  /// `@unchecked Sendable`: a request hands its stream to one task, which alone reads it.
  private final class StreamBox: @unchecked Sendable {
    let stream: InputStream
    init(_ stream: InputStream) { self.stream = stream }
  }
  /// Whether the session sends its kept cookies with the request and keeps those of its response.
  public var httpShouldHandleCookies = true
  /// The URL of the page the request belongs to, for the cookie accept policy.
  public var mainDocumentURL: URL?
  /// The kind of traffic (kept: a hint, as on iOS).
  public var networkServiceType = NetworkServiceType.default
  /// Whether the request may use an expensive network (kept: there is one network here).
  public var allowsExpensiveNetworkAccess = true
  /// Whether the request may use a constrained network (kept).
  public var allowsConstrainedNetworkAccess = true
  /// Whether the request may be pipelined (kept).
  public var httpShouldUsePipelining = false
  /// The header fields, names in the case they were first set.
  private var fields: [(name: String, value: String)] = []
  private var method = "GET"

  /// A GET request for `url`.
  public init(url: URL, cachePolicy: CachePolicy = .useProtocolCachePolicy, timeoutInterval: TimeInterval = 60) {
    self.url = url
    self.cachePolicy = cachePolicy
    self.timeoutInterval = timeoutInterval
  }

  /// The kind of traffic a request carries, as Foundation's `NSURLRequest.NetworkServiceType`.
  public enum NetworkServiceType: UInt, Sendable {
    /// Ordinary traffic.
    case `default` = 0
    /// Voice over IP control traffic.
    case voip = 1
    /// Video.
    case video = 2
    /// Background traffic.
    case background = 3
    /// Voice.
    case voice = 4
    /// Data the user waits for.
    case responsiveData = 6
    /// Audio and video streaming.
    case avStreaming = 8
    /// Interactive audio and video.
    case responsiveAV = 9
    /// Call signalling.
    case callSignaling = 11
  }

  /// How a request uses the URL cache, as Foundation's `NSURLRequest.CachePolicy`.
  public enum CachePolicy: UInt, Sendable {
    /// The protocol's rules.
    case useProtocolCachePolicy = 0
    /// Load, ignoring what is cached here.
    case reloadIgnoringLocalCacheData = 1
    /// Load, ignoring every cache on the way.
    case reloadIgnoringLocalAndRemoteCacheData = 4
    /// What is cached, else load.
    case returnCacheDataElseLoad = 2
    /// What is cached, never load.
    case returnCacheDataDontLoad = 3
    /// What is cached once the server says it is current.
    case reloadRevalidatingCacheData = 5
    /// `reloadIgnoringLocalCacheData`'s other name.
    public static let reloadIgnoringCacheData = CachePolicy.reloadIgnoringLocalCacheData
  }

  /// Every header field, or nil when there is none.
  public var allHTTPHeaderFields: [String: String]? {
    get { fields.isEmpty ? nil : Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { _, b in b }) }
    set {
      fields = []
      for (name, value) in (newValue ?? [:]).sorted(by: { $0.key < $1.key }) {
        setValue(value, forHTTPHeaderField: name)
      }
    }
  }

  /// The field `field`'s value (names compare case-insensitively), or nil.
  public func value(forHTTPHeaderField field: String) -> String? {
    fields.first { $0.name.caseInsensitiveCompare(field) == .orderedSame }?.value
  }

  /// Sets field `field` to `value`, replacing it; nil removes it.
  public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
    let index = fields.firstIndex { $0.name.caseInsensitiveCompare(field) == .orderedSame }
    switch (index, value) {
    case (let index?, let value?): fields[index].value = value
    case (let index?, nil): fields.remove(at: index)
    case (nil, let value?): fields.append((field, value))
    case (nil, nil): break
    }
  }

  /// Appends `value` to field `field` (comma-separated), as Foundation does.
  public mutating func addValue(_ value: String, forHTTPHeaderField field: String) {
    setValue(self.value(forHTTPHeaderField: field).map { $0 + "," + value } ?? value, forHTTPHeaderField: field)
  }

  /// The session service's form of the request, with the body where Foundation sends one (not
  /// with GET or HEAD).
  var sessionRequest: SessionRequest {
    SessionRequest(
      url: url ?? URL(fileURLWithPath: "/"), method: method,
      headers: fields.map { SessionHeader(name: $0.name, value: $0.value) },
      body: SessionRequest.sendsBody(method) ? httpBody : nil)
  }

  /// The request a snapshot's `SessionRequest` describes.
  init(_ request: SessionRequest) {
    self.init(url: request.url)
    method = request.method
    fields = request.headers.map { ($0.name, $0.value) }
    httpBody = request.body
  }

  /// Two requests are equal when their URL, method, timeout, body and fields are.
  public static func == (a: URLRequest, b: URLRequest) -> Bool {
    a.url == b.url && a.method == b.method && a.timeoutInterval == b.timeoutInterval && a.httpBody == b.httpBody
      && a.fields.map(\.name) == b.fields.map(\.name) && a.fields.map(\.value) == b.fields.map(\.value)
  }

  /// Hashes the URL and method.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(url)
    hasher.combine(method)
  }
}

/// A response's metadata, as Foundation's `URLResponse`; `NSSecureCoding`, so that an app keeps a
/// task's response with `NSKeyedArchiver` (`requiringSecureCoding: true`), as on iOS.
///
/// `@unchecked Sendable`: its properties are set by the initialisers alone (`private(set)`); the
/// class is open, as Foundation's, so the compiler cannot prove it.
open class URLResponse: NSObject, NSSecureCoding, @unchecked Sendable {
  /// The URL it answers.
  open private(set) var url: URL?
  /// The length the server announced, -1 when unknown.
  open private(set) var expectedContentLength: Int64
  private let givenMIMEType: String?
  private let givenTextEncodingName: String?

  /// A response for `url`.
  public init(url: URL?, expectedContentLength: Int64) {
    self.url = url
    self.expectedContentLength = expectedContentLength
    givenMIMEType = nil
    givenTextEncodingName = nil
  }

  /// A response for `url` of `mimeType`, as Foundation's.
  public init(url: URL, mimeType: String?, expectedContentLength length: Int, textEncodingName name: String?) {
    self.url = url
    expectedContentLength = Int64(length)
    givenMIMEType = mimeType
    givenTextEncodingName = name
  }

  /// Archives the response: its URL, MIME type, expected length and text encoding.
  open func encode(with coder: NSCoder) {
    ResponseArchive.encode(url?.absoluteString, forKey: ResponseArchive.url, to: coder)
    ResponseArchive.encode(givenMIMEType, forKey: ResponseArchive.mimeType, to: coder)
    ResponseArchive.encode(givenTextEncodingName, forKey: ResponseArchive.textEncodingName, to: coder)
    coder.encode(expectedContentLength, forKey: ResponseArchive.expectedContentLength)
  }

  /// A response from an archive `encode(with:)` wrote; nil for one it did not (a field missing or
  /// not of its kind), which the unarchiver reports as its error.
  public required init?(coder: NSCoder) {
    guard let fields = ResponseArchive.Fields(coder) else { return nil }
    url = fields.url
    expectedContentLength = fields.expectedContentLength
    givenMIMEType = fields.mimeType
    givenTextEncodingName = fields.textEncodingName
  }

  /// The body's MIME type, nil when unknown.
  open var mimeType: String? { givenMIMEType }
  /// The body's character set, nil when unknown.
  open var textEncodingName: String? { givenTextEncodingName }

  /// A name to save the body under, as Foundation's: the `Content-Disposition` field's file name,
  /// else the URL's last component, else "Unknown".
  open var suggestedFilename: String? {
    let last = url?.lastPathComponent ?? ""
    return last.isEmpty || last == "/" ? "Unknown" : last
  }
}

/// An HTTP response, as Foundation's `HTTPURLResponse`.
///
/// `@unchecked Sendable`: as `URLResponse`, its properties are set by the initialiser alone.
open class HTTPURLResponse: URLResponse, @unchecked Sendable {
  /// The HTTP status code.
  open private(set) var statusCode: Int
  /// The response's header fields (a repeated name's values joined by commas).
  open private(set) var allHeaderFields: [AnyHashable: Any]

  /// The header fields of `lines` (name and value, in order), a repeated name's values joined by
  /// commas, as Foundation joins them.
  static func fields(_ lines: some Sequence<(String, String)>) -> [String: String] {
    Dictionary(lines.map { ($0.0, $0.1) }) { first, next in first + ", " + next }
  }

  /// A response with status `statusCode`; nil for a status outside 100...599, as Foundation. Its
  /// expected length is the `Content-Length` field's, -1 without one.
  public init?(url: URL, statusCode: Int, httpVersion: String?, headerFields: [String: String]?) {
    guard (100...599).contains(statusCode) else { return nil }
    self.statusCode = statusCode
    allHeaderFields = headerFields ?? [:]
    let length = headerFields?.first { $0.key.caseInsensitiveCompare("Content-Length") == .orderedSame }?.value
    super.init(url: url, expectedContentLength: length.flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } ?? -1)
  }

  /// Archives the response: what `URLResponse` archives, the status and the header fields.
  open override func encode(with coder: NSCoder) {
    super.encode(with: coder)
    coder.encode(statusCode, forKey: ResponseArchive.statusCode)
    let fields = allHeaderFields.reduce(into: [String: String]()) { fields, field in
      if let name = field.key as? String, let value = field.value as? String { fields[name] = value }
    }
    ResponseArchive.encode(fields, to: coder)
  }

  /// A response from an archive `encode(with:)` wrote; nil for one it did not (no status within
  /// 100...599, header fields that are not names and values).
  public required init?(coder: NSCoder) {
    let status = coder.decodeInteger(forKey: ResponseArchive.statusCode)
    guard (100...599).contains(status), let fields = ResponseArchive.headerFields(in: coder) else { return nil }
    statusCode = status
    allHeaderFields = fields
    super.init(coder: coder)
  }

  /// The header field `field`'s value (names compare case-insensitively), or nil.
  open func value(forHTTPHeaderField field: String) -> String? {
    allHeaderFields.first { ($0.key as? String)?.caseInsensitiveCompare(field) == .orderedSame }?.value as? String
  }

  /// The file name `Content-Disposition` gives (its `filename` parameter, without a path), else
  /// the URL's last component, else "Unknown".
  open override var suggestedFilename: String? {
    if let disposition = value(forHTTPHeaderField: "Content-Disposition"),
      let range = disposition.range(of: "filename=", options: .caseInsensitive)
    {
      var name = disposition[range.upperBound...].prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
      name = name.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
      if let slash = name.lastIndex(where: { $0 == "/" || $0 == "\\" }) {
        name = String(name[name.index(after: slash)...])
      }
      if !name.isEmpty, name != ".", name != ".." { return name }
    }
    return super.suggestedFilename
  }

  /// The body's MIME type, from `Content-Type`, lowercased; nil without one.
  open override var mimeType: String? {
    value(forHTTPHeaderField: "Content-Type")?.split(separator: ";").first
      .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
  }

  /// The body's character set, from `Content-Type`'s `charset`; nil without one.
  open override var textEncodingName: String? {
    value(forHTTPHeaderField: "Content-Type")?.split(separator: ";").dropFirst()
      .map { $0.trimmingCharacters(in: .whitespaces) }
      .first { $0.lowercased().hasPrefix("charset=") }
      .map { String($0.dropFirst(8)).trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased() }
  }

  /// The status's usual phrase, lowercased as Foundation's.
  open class func localizedString(forStatusCode statusCode: Int) -> String {
    HTTPURLResponse.phrases[statusCode] ?? "server error"
  }

  private static let phrases: [Int: String] = [
    200: "no error", 201: "created", 204: "no content", 206: "partial content", 400: "bad request",
    401: "unauthorized", 403: "forbidden", 404: "not found", 500: "internal server error",
  ]
}

/// The key of `URLResourceValues`' file protection, as Apple's `URLFileProtection` (the class names
/// `FileProtectionType` has).
public struct URLFileProtection: RawRepresentable, Hashable, Sendable {
  /// The class's name.
  public var rawValue: String
  /// Wraps a class name.
  public init(rawValue: String) { self.rawValue = rawValue }
  /// No protection.
  public static let none = URLFileProtection(rawValue: FileProtectionType.none.rawValue)
  /// Readable only while unlocked.
  public static let complete = URLFileProtection(rawValue: FileProtectionType.complete.rawValue)
  /// Once open, stays readable after locking.
  public static let completeUnlessOpen = URLFileProtection(rawValue: FileProtectionType.completeUnlessOpen.rawValue)
  /// Readable after the first unlock.
  public static let completeUntilFirstUserAuthentication = URLFileProtection(
    rawValue: FileProtectionType.completeUntilFirstUserAuthentication.rawValue)
}
