import Foundation
import Synchronization

/// What a notification asks to do, as UserNotifications' `UNAuthorizationOptions`.
public struct UNAuthorizationOptions: OptionSet, Sendable {
  /// The options' bits.
  public let rawValue: UInt
  /// Makes options from their bits.
  public init(rawValue: UInt) { self.rawValue = rawValue }
  /// Update the badge.
  public static let badge = UNAuthorizationOptions(rawValue: 1 << 0)
  /// Play a sound.
  public static let sound = UNAuthorizationOptions(rawValue: 1 << 1)
  /// Show an alert.
  public static let alert = UNAuthorizationOptions(rawValue: 1 << 2)
  /// Show in CarPlay.
  public static let carPlay = UNAuthorizationOptions(rawValue: 1 << 3)
  /// Critical alerts.
  public static let criticalAlert = UNAuthorizationOptions(rawValue: 1 << 4)
  /// Provisional delivery.
  public static let provisional = UNAuthorizationOptions(rawValue: 1 << 6)
}

/// Whether the app may post notifications, as `UNAuthorizationStatus`.
public enum UNAuthorizationStatus: Int, Sendable {
  /// Not asked yet.
  case notDetermined = 0
  /// Refused.
  case denied = 1
  /// Granted.
  case authorized = 2
  /// Granted quietly.
  case provisional = 3
  /// Granted for an App Clip.
  case ephemeral = 4
}

/// A notification's sound (there is none to play here: kept).
public final class UNNotificationSound: Sendable {
  /// The default sound.
  public static let `default` = UNNotificationSound()
}

/// What a notification says, as `UNNotificationContent`.
public class UNNotificationContent: NSObject, @unchecked Sendable {
  // @unchecked: the mutable subclass is set up before the request is made, then only read.
  /// Its title.
  public internal(set) var title = ""
  /// Its subtitle.
  public internal(set) var subtitle = ""
  /// Its text.
  public internal(set) var body = ""
  /// The badge number it sets.
  public internal(set) var badge: NSNumber?
  /// Its sound.
  public internal(set) var sound: UNNotificationSound?
  /// The app's data.
  public internal(set) var userInfo: [AnyHashable: Any] = [:]
  /// Its thread, for grouping.
  public internal(set) var threadIdentifier = ""
  /// Its category.
  public internal(set) var categoryIdentifier = ""
}

/// A notification's content the app fills in, as `UNMutableNotificationContent`.
public final class UNMutableNotificationContent: UNNotificationContent, @unchecked Sendable {
  // @unchecked: as its superclass.
  /// Its title.
  public override var title: String {
    get { super.title }
    set { super.title = newValue }
  }
  /// Its subtitle.
  public override var subtitle: String {
    get { super.subtitle }
    set { super.subtitle = newValue }
  }
  /// Its text.
  public override var body: String {
    get { super.body }
    set { super.body = newValue }
  }
  /// The badge number it sets.
  public override var badge: NSNumber? {
    get { super.badge }
    set { super.badge = newValue }
  }
  /// Its sound.
  public override var sound: UNNotificationSound? {
    get { super.sound }
    set { super.sound = newValue }
  }
  /// The app's data.
  public override var userInfo: [AnyHashable: Any] {
    get { super.userInfo }
    set { super.userInfo = newValue }
  }
  /// Its thread, for grouping.
  public override var threadIdentifier: String {
    get { super.threadIdentifier }
    set { super.threadIdentifier = newValue }
  }
  /// Its category.
  public override var categoryIdentifier: String {
    get { super.categoryIdentifier }
    set { super.categoryIdentifier = newValue }
  }
}

/// When a notification is delivered, as `UNNotificationTrigger`.
public class UNNotificationTrigger: NSObject, @unchecked Sendable {
  // @unchecked: immutable.
  /// Whether it repeats.
  public let repeats: Bool
  init(repeats: Bool) { self.repeats = repeats }
}

/// A notification delivered after an interval, as `UNTimeIntervalNotificationTrigger`.
public final class UNTimeIntervalNotificationTrigger: UNNotificationTrigger, @unchecked Sendable {
  // @unchecked: immutable.
  /// Seconds from when it is added.
  public let timeInterval: TimeInterval
  /// A trigger `timeInterval` seconds from now (at least 60 to repeat, as iOS asks).
  public init(timeInterval: TimeInterval, repeats: Bool) {
    self.timeInterval = timeInterval
    super.init(repeats: repeats)
  }
}

/// A notification to deliver, as `UNNotificationRequest`.
public final class UNNotificationRequest: NSObject, @unchecked Sendable {
  // @unchecked: immutable; its content is set up before.
  /// Its identifier: a request with the same one replaces it.
  public let identifier: String
  /// What it says.
  public let content: UNNotificationContent
  /// When (nil: at once).
  public let trigger: UNNotificationTrigger?

  /// A request for `content`, delivered when `trigger` says (nil: at once).
  public init(identifier: String, content: UNNotificationContent, trigger: UNNotificationTrigger?) {
    self.identifier = identifier
    self.content = content
    self.trigger = trigger
  }
}

/// A delivered notification, as `UNNotification`.
public final class UNNotification: NSObject, @unchecked Sendable {
  // @unchecked: immutable.
  /// When it was delivered.
  public let date: Date
  /// Its request.
  public let request: UNNotificationRequest
  init(date: Date, request: UNNotificationRequest) {
    self.date = date
    self.request = request
  }
}

/// The app's notification settings, as `UNNotificationSettings`.
public final class UNNotificationSettings: NSObject, Sendable {
  /// Whether the app may post.
  public let authorizationStatus: UNAuthorizationStatus
  init(authorizationStatus: UNAuthorizationStatus) { self.authorizationStatus = authorizationStatus }
}

/// The answer to a notification's presentation, as `UNNotificationPresentationOptions`.
public struct UNNotificationPresentationOptions: OptionSet, Sendable {
  /// The options' bits.
  public let rawValue: UInt
  /// Makes options from their bits.
  public init(rawValue: UInt) { self.rawValue = rawValue }
  /// Update the badge.
  public static let badge = UNNotificationPresentationOptions(rawValue: 1 << 0)
  /// Play the sound.
  public static let sound = UNNotificationPresentationOptions(rawValue: 1 << 1)
  /// Show an alert.
  public static let alert = UNNotificationPresentationOptions(rawValue: 1 << 2)
  /// List it in the Notification Center.
  public static let list = UNNotificationPresentationOptions(rawValue: 1 << 3)
  /// Show a banner.
  public static let banner = UNNotificationPresentationOptions(rawValue: 1 << 4)
}

/// The identifier of the action of a user who opened a notification.
public let UNNotificationDefaultActionIdentifier = "com.apple.UNNotificationDefaultActionIdentifier"
/// The identifier of the action of a user who dismissed a notification.
public let UNNotificationDismissActionIdentifier = "com.apple.UNNotificationDismissActionIdentifier"

/// A user's answer to a notification, as `UNNotificationResponse` (no user answers here).
public class UNNotificationResponse: NSObject, @unchecked Sendable {
  // @unchecked: immutable.
  /// The notification answered.
  public let notification: UNNotification
  /// The action taken.
  public let actionIdentifier: String
  init(notification: UNNotification, actionIdentifier: String) {
    self.notification = notification
    self.actionIdentifier = actionIdentifier
  }
}

/// The notification center's delegate, as UserNotifications'. No user sees or taps a notification
/// here, so neither method is ever called; declared so that code implementing them compiles.
public protocol UNUserNotificationCenterDelegate: AnyObject {
  /// A notification arrives while the app is in the foreground: how to present it.
  func userNotificationCenter(
    _ center: UNUserNotificationCenter, willPresent notification: UNNotification,
    withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void)
  /// The user answered a notification.
  func userNotificationCenter(
    _ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse,
    withCompletionHandler completionHandler: @escaping @Sendable () -> Void)
}

extension UNUserNotificationCenterDelegate {
  /// Presents nothing.
  public func userNotificationCenter(
    _ center: UNUserNotificationCenter, willPresent notification: UNNotification,
    withCompletionHandler completionHandler: @escaping @Sendable (UNNotificationPresentationOptions) -> Void
  ) { completionHandler([]) }
  /// Calls the handler.
  public func userNotificationCenter(
    _ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse,
    withCompletionHandler completionHandler: @escaping @Sendable () -> Void
  ) { completionHandler() }
}

/// The app's local notifications, as UserNotifications' `UNUserNotificationCenter`. There is no
/// screen: authorization is granted when asked, and a notification is "shown" as one line on the
/// app's standard error, `notification "TITLE": BODY`, when its trigger fires (at once without
/// one; a repeating one each interval while the app runs), and then listed as delivered.
public final class UNUserNotificationCenter: NSObject, @unchecked Sendable {
  // @unchecked: what changes is in `state`; `delegate` is the app's, set once, as UIKit's.
  private struct State: @unchecked Sendable {
    // @unchecked: requests hold content the app made; only touched under the lock.
    var status = UNAuthorizationStatus.notDetermined
    var pending: [String: (request: UNNotificationRequest, timer: DispatchSourceTimer?)] = [:]
    var delivered: [UNNotification] = []
    var badge = 0
  }
  private let state = Mutex(State())
  private static let center = UNUserNotificationCenter()

  /// The center's delegate.
  public weak var delegate: (any UNUserNotificationCenterDelegate)?

  /// The app's center.
  public class func current() -> UNUserNotificationCenter { center }

  /// Asks to post notifications: granted.
  public func requestAuthorization(
    options: UNAuthorizationOptions = [], completionHandler: @escaping @Sendable (Bool, (any Error)?) -> Void
  ) {
    state.withLock { $0.status = .authorized }
    DispatchQueue.global().async { completionHandler(true, nil) }
  }

  /// Asks to post notifications: granted.
  public func requestAuthorization(options: UNAuthorizationOptions = []) async throws -> Bool {
    state.withLock { $0.status = .authorized }
    return true
  }

  /// The app's settings.
  public func getNotificationSettings(completionHandler: @escaping @Sendable (UNNotificationSettings) -> Void) {
    let status = state.withLock { $0.status }
    DispatchQueue.global().async { completionHandler(UNNotificationSettings(authorizationStatus: status)) }
  }

  /// The app's settings.
  public func notificationSettings() async -> UNNotificationSettings {
    UNNotificationSettings(authorizationStatus: state.withLock { $0.status })
  }

  /// Schedules `request` (replacing one with its identifier). Without authorization it is not
  /// delivered, as on iOS (the handler still gets no error).
  public func add(
    _ request: UNNotificationRequest, withCompletionHandler completionHandler: (@Sendable ((any Error)?) -> Void)? = nil
  ) {
    let interval = (request.trigger as? UNTimeIntervalNotificationTrigger)?.timeInterval ?? 0
    let repeats = request.trigger?.repeats ?? false
    schedule(request, after: interval, every: repeats && interval > 0 ? interval : nil)
    if let completionHandler { DispatchQueue.global().async { completionHandler(nil) } }
  }

  /// Schedules `request`, replacing one with its identifier: delivered after `delay` seconds (at
  /// once when there is none and it does not repeat), then every `interval` seconds while the app
  /// runs when one is given. `add` schedules by the request's trigger, UIKit's
  /// `UILocalNotification` by its fire date and repeat interval.
  func schedule(_ request: UNNotificationRequest, after delay: TimeInterval, every interval: TimeInterval?) {
    removePendingNotificationRequests(withIdentifiers: [request.identifier])
    guard delay > 0 || interval != nil else { return deliver(request) }
    let timer = DispatchSource.makeTimerSource(queue: .global())
    timer.schedule(deadline: .now() + max(delay, 0), repeating: interval ?? .infinity)
    timer.setEventHandler { [weak self] in
      self?.deliver(request)
      if interval == nil { self?.state.withLock { _ = $0.pending.removeValue(forKey: request.identifier) } }
    }
    state.withLock { $0.pending[request.identifier] = (request, timer) }
    timer.resume()
  }

  /// The requests not yet delivered, read at once (UIKit's `scheduledLocalNotifications`).
  var pendingRequests: [UNNotificationRequest] { state.withLock { $0.pending.values.map(\.request) } }

  /// The badge number last set (UIKit's `applicationIconBadgeNumber`).
  var badgeCount: Int {
    get { state.withLock { $0.badge } }
    set { state.withLock { $0.badge = newValue } }
  }

  /// Schedules `request`.
  public func add(_ request: UNNotificationRequest) async throws { add(request, withCompletionHandler: nil) }

  /// The requests not yet delivered.
  public func getPendingNotificationRequests(completionHandler: @escaping @Sendable ([UNNotificationRequest]) -> Void) {
    let requests = state.withLock { $0.pending.values.map(\.request) }
    DispatchQueue.global().async { completionHandler(requests) }
  }

  /// The notifications delivered, oldest first.
  public func getDeliveredNotifications(completionHandler: @escaping @Sendable ([UNNotification]) -> Void) {
    let delivered = state.withLock { $0.delivered }
    DispatchQueue.global().async { completionHandler(delivered) }
  }

  /// The notifications delivered, oldest first.
  public func deliveredNotifications() async -> [UNNotification] { state.withLock { $0.delivered } }

  /// Cancels the pending requests with `identifiers`.
  public func removePendingNotificationRequests(withIdentifiers identifiers: [String]) {
    let timers = state.withLock { state in identifiers.compactMap { state.pending.removeValue(forKey: $0)?.timer } }
    for timer in timers { timer.cancel() }
  }

  /// Cancels every pending request.
  public func removeAllPendingNotificationRequests() {
    removePendingNotificationRequests(withIdentifiers: state.withLock { Array($0.pending.keys) })
  }

  /// Forgets the delivered notifications with `identifiers`.
  public func removeDeliveredNotifications(withIdentifiers identifiers: [String]) {
    state.withLock { $0.delivered.removeAll { identifiers.contains($0.request.identifier) } }
  }

  /// Forgets every delivered notification.
  public func removeAllDeliveredNotifications() { state.withLock { $0.delivered.removeAll() } }

  /// Sets the app's badge number (kept: there is no icon to show it on).
  public func setBadgeCount(
    _ newBadgeCount: Int, withCompletionHandler completionHandler: (@Sendable ((any Error)?) -> Void)? = nil
  ) {
    state.withLock { $0.badge = newBadgeCount }
    if let completionHandler { DispatchQueue.global().async { completionHandler(nil) } }
  }

  /// Sets the app's badge number.
  public func setBadgeCount(_ newBadgeCount: Int) async throws { state.withLock { $0.badge = newBadgeCount } }

  /// Shows `request` (a line on standard error) and lists it as delivered, if authorized.
  private func deliver(_ request: UNNotificationRequest) {
    let authorized = state.withLock { state -> Bool in
      guard state.status == .authorized || state.status == .provisional else { return false }
      state.delivered.append(UNNotification(date: Date(), request: request))
      return true
    }
    guard authorized else { return }
    let content = request.content
    FileHandle.standardError.write(Data("notification \"\(content.title)\": \(content.body)\n".utf8))
  }
}
