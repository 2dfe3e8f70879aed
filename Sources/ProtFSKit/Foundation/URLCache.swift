import Foundation
import Synchronization

/// A response kept with its body, as Foundation's `CachedURLResponse`.
public final class CachedURLResponse: NSObject, @unchecked Sendable {
  // @unchecked: immutable; its response is made once.
  /// The response.
  public let response: URLResponse
  /// Its body.
  public let data: Data
  /// What the app attached.
  public let userInfo: [AnyHashable: Any]?
  /// Where it may be kept.
  public let storagePolicy: URLCache.StoragePolicy

  /// A response to keep.
  public init(
    response: URLResponse, data: Data, userInfo: [AnyHashable: Any]? = nil,
    storagePolicy: URLCache.StoragePolicy = .allowed
  ) {
    self.response = response
    self.data = data
    self.userInfo = userInfo
    self.storagePolicy = storagePolicy
  }
}

/// Responses kept by request, as Foundation's `URLCache`, in memory. protfs's sessions neither read
/// nor fill it (every request loads, as `docs/protfskit.md` says); what the app stores itself is
/// kept and handed back.
public final class URLCache: NSObject, Sendable {
  /// Where a response may be kept.
  public enum StoragePolicy: UInt, Sendable {
    /// On disk or in memory.
    case allowed = 0
    /// In memory only.
    case allowedInMemoryOnly = 1
    /// Not kept.
    case notAllowed = 2
  }

  private struct State: Sendable {
    var shared = URLCache(memoryCapacity: 512 * 1024, diskCapacity: 10 * 1024 * 1024, diskPath: nil)
  }
  private static let global = Mutex(State())
  private let capacities: Mutex<(memory: Int, disk: Int)>
  private let kept = Mutex<[URLRequestKey: CachedURLResponse]>([:])

  /// The cache sessions use by default.
  public static var shared: URLCache {
    get { global.withLock { $0.shared } }
    set { global.withLock { $0.shared = newValue } }
  }

  /// A cache of these capacities (the disk's is kept as a number: nothing is written).
  public init(memoryCapacity: Int, diskCapacity: Int, diskPath path: String?) {
    capacities = Mutex((memoryCapacity, diskCapacity))
  }

  /// A cache of these capacities in `directory` (nothing is written there).
  public convenience init(memoryCapacity: Int, diskCapacity: Int, directory: URL? = nil) {
    self.init(memoryCapacity: memoryCapacity, diskCapacity: diskCapacity, diskPath: directory?.path)
  }

  /// The memory it may use.
  public var memoryCapacity: Int {
    get { capacities.withLock { $0.memory } }
    set { capacities.withLock { $0.memory = newValue } }
  }
  /// The disk it may use.
  public var diskCapacity: Int {
    get { capacities.withLock { $0.disk } }
    set { capacities.withLock { $0.disk = newValue } }
  }
  /// The bytes of the bodies kept.
  public var currentMemoryUsage: Int { kept.withLock { $0.values.reduce(0) { $0 + $1.data.count } } }
  /// Nothing is kept on disk.
  public var currentDiskUsage: Int { 0 }

  /// The response kept for `request`.
  public func cachedResponse(for request: URLRequest) -> CachedURLResponse? {
    kept.withLock { $0[URLRequestKey(request)] }
  }

  /// Keeps `response` for `request`, unless its policy forbids it or it is larger than the memory.
  public func storeCachedResponse(_ response: CachedURLResponse, for request: URLRequest) {
    guard response.storagePolicy != .notAllowed, response.data.count <= memoryCapacity else { return }
    kept.withLock { $0[URLRequestKey(request)] = response }
  }

  /// Forgets the response kept for `request`.
  public func removeCachedResponse(for request: URLRequest) {
    _ = kept.withLock { $0.removeValue(forKey: URLRequestKey(request)) }
  }

  /// Forgets every response.
  public func removeAllCachedResponses() { kept.withLock { $0.removeAll() } }

  /// Forgets every response (the dates they were kept are not recorded).
  public func removeCachedResponses(since date: Date) { removeAllCachedResponses() }

  /// A request as a cache key: its URL and method.
  private struct URLRequestKey: Hashable, Sendable {
    var url: URL?
    var method: String
    init(_ request: URLRequest) {
      url = request.url
      method = request.httpMethod ?? "GET"
    }
  }
}
