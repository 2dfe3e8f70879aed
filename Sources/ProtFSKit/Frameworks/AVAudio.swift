import Foundation
import ProtFSApp
import Synchronization

/// AVFoundation's audio session, as far as it decides an app's life (docs/semantics.md §8): an
/// app whose Info.plist lists `audio` in `UIBackgroundModes`, with the shared session's category
/// `.playback` and the session active, keeps running in the background while an `AVAudioPlayer`
/// plays, silent or not; once nothing plays it is suspended as any app. No sound is made.
///
/// `@unchecked Sendable`: its state is behind a mutex.
public final class AVAudioSession: @unchecked Sendable {
  /// A session category, as AVFoundation names them.
  public struct Category: RawRepresentable, Hashable, Sendable {
    /// AVFoundation's name for it.
    public let rawValue: String
    /// Makes a category of `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Playback that goes on in the background (with the `audio` mode).
    public static let playback = Category(rawValue: "AVAudioSessionCategoryPlayback")
    /// The default: silenced by the screen lock and the switch.
    public static let soloAmbient = Category(rawValue: "AVAudioSessionCategorySoloAmbient")
    /// Mixes with others, silenced by the lock.
    public static let ambient = Category(rawValue: "AVAudioSessionCategoryAmbient")
    /// Recording and playback.
    public static let playAndRecord = Category(rawValue: "AVAudioSessionCategoryPlayAndRecord")
  }

  /// A session mode (kept, not acted on).
  public struct Mode: RawRepresentable, Hashable, Sendable {
    /// AVFoundation's name for it.
    public let rawValue: String
    /// Makes a mode of `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The default.
    public static let `default` = Mode(rawValue: "AVAudioSessionModeDefault")
  }

  /// Options of a category (kept, not acted on).
  public struct CategoryOptions: OptionSet, Sendable {
    /// The options' bits.
    public let rawValue: UInt
    /// Makes options of `rawValue`.
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// Mix with other apps' audio.
    public static let mixWithOthers = CategoryOptions(rawValue: 1)
  }

  /// The app's session.
  public static func sharedInstance() -> AVAudioSession { shared }
  private static let shared = AVAudioSession()

  private let state = Mutex((category: Category.soloAmbient, active: false, playing: 0, told: false))

  private init() {}

  /// The category.
  public var category: Category { state.withLock { $0.category } }

  /// Sets the category.
  public func setCategory(_ category: Category, mode: Mode = .default, options: CategoryOptions = []) throws {
    state.withLock { $0.category = category }
    update()
  }

  /// Sets the category.
  public func setCategory(_ category: Category) throws { try setCategory(category, mode: .default, options: []) }

  /// Activates or deactivates the session.
  public func setActive(_ active: Bool) throws {
    state.withLock { $0.active = active }
    update()
  }

  /// A player started (+1) or stopped (-1).
  func playing(_ change: Int) {
    state.withLock { $0.playing = max(0, $0.playing + change) }
    update()
  }

  /// Tells the supervisor whether audio plays with an active playback session, when that changed.
  private func update() {
    let message = state.withLock { current -> Bool? in
      let playing = current.active && current.category == .playback && current.playing > 0
      guard playing != current.told else { return nil }
      current.told = playing
      return playing
    }
    if let message { _ = Supervisor.send(.audio(playing: message)) }
  }
}

/// A player of a sound file or data. It "plays" until stopped (no audio is decoded or made), which
/// is what keeps an app with the `audio` mode running in the background.
///
/// `@unchecked Sendable`: its state is behind a mutex.
public final class AVAudioPlayer: @unchecked Sendable {
  /// The sound's URL, when made from one.
  public let url: URL?
  /// The sound's data.
  public let data: Data?
  /// How often it repeats (-1: until stopped).
  public var numberOfLoops: Int {
    get { state.withLock { $0.loops } }
    set { state.withLock { $0.loops = newValue } }
  }
  /// The volume, 0 (silent) to 1.
  public var volume: Float {
    get { state.withLock { $0.volume } }
    set { state.withLock { $0.volume = min(1, max(0, newValue)) } }
  }
  private let state = Mutex((playing: false, loops: 0, volume: Float(1)))

  /// A player of the file at `url`, which must be readable.
  public init(contentsOf url: URL) throws {
    guard FileManager.default.isReadableFile(atPath: url.path) else {
      // kAudioFileUnspecifiedError ('wht?'), in NSOSStatusErrorDomain, as AVFoundation throws it.
      throw NSError(domain: "NSOSStatusErrorDomain", code: 2_003_334_207, userInfo: [NSFilePathErrorKey: url.path])
    }
    self.url = url
    self.data = nil
  }

  /// A player of `data`.
  public init(data: Data) throws {
    self.url = nil
    self.data = data
  }

  /// Whether it plays.
  public var isPlaying: Bool { state.withLock { $0.playing } }

  /// Prepares to play; always true.
  @discardableResult public func prepareToPlay() -> Bool { true }

  /// Starts playing; true when it plays.
  @discardableResult
  public func play() -> Bool {
    let started = state.withLock { current -> Bool in
      defer { current.playing = true }
      return !current.playing
    }
    if started { AVAudioSession.sharedInstance().playing(1) }
    return true
  }

  /// Pauses.
  public func pause() { stop() }

  /// Stops.
  public func stop() {
    let stopped = state.withLock { current -> Bool in
      defer { current.playing = false }
      return current.playing
    }
    if stopped { AVAudioSession.sharedInstance().playing(-1) }
  }

  deinit { stop() }
}
