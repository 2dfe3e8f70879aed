import Foundation
import Synchronization

/// The name of the default sound, as UIKit's `UILocalNotificationDefaultSoundName`.
public let UILocalNotificationDefaultSoundName = "UILocalNotificationDefaultSoundName"

/// A notification the app schedules, as UIKit's `UILocalNotification` (iOS 4 to 9's API,
/// deprecated in iOS 10 and still compiled by apps). It is delivered by `UNUserNotificationCenter`,
/// as iOS 10 and later deliver it: shown as one line on the app's standard error,
/// `notification "TITLE": BODY` (`alertTitle`, `alertBody`), once the user allowed alerts
/// (`registerUserNotificationSettings(_:)` or the center's `requestAuthorization`).
///
/// `@unchecked Sendable`: the app sets it up before it schedules it, and scheduling takes a copy,
/// as UIKit's.
open class UILocalNotification: NSObject, NSCopying, @unchecked Sendable {
  /// When it is delivered; nil or a past date: at once.
  open var fireDate: Date?
  /// The time zone of `fireDate` (kept: a date here is a moment, as with nil on iOS).
  open var timeZone: TimeZone?
  /// The calendar unit it repeats by (`.minute`, `.hour`, `.day`, `.weekOfYear`, `.month`,
  /// `.year`); empty: it does not repeat.
  open var repeatInterval: NSCalendar.Unit = []
  /// The calendar `repeatInterval` is counted in (the user's when nil).
  open var repeatCalendar: Calendar?
  /// Its text.
  open var alertBody: String?
  /// Its title.
  open var alertTitle: String?
  /// Whether it offers an action (kept).
  open var hasAction = true
  /// The action's title (kept).
  open var alertAction: String?
  /// The launch image's name (kept).
  open var alertLaunchImage: String?
  /// Its sound's name (`UILocalNotificationDefaultSoundName`), or nil for none.
  open var soundName: String?
  /// The badge number it sets; 0 leaves the badge.
  open var applicationIconBadgeNumber = 0
  /// The app's data.
  open var userInfo: [AnyHashable: Any]?
  /// Its category (`UIUserNotificationCategory`'s identifier).
  open var category: String?

  /// Which notification this is: copies keep it, so that a copy from
  /// `scheduledLocalNotifications` cancels what was scheduled.
  let identity: UUID

  /// An empty notification, delivered at once when scheduled.
  public override init() {
    identity = UUID()
    super.init()
  }

  /// A copy of `other`, the same notification.
  private init(copying other: UILocalNotification) {
    identity = other.identity
    super.init()
    (fireDate, timeZone, repeatInterval, repeatCalendar) = (
      other.fireDate, other.timeZone, other.repeatInterval, other.repeatCalendar
    )
    (alertBody, alertTitle, hasAction, alertAction) = (
      other.alertBody, other.alertTitle, other.hasAction, other.alertAction
    )
    (alertLaunchImage, soundName, applicationIconBadgeNumber) = (
      other.alertLaunchImage, other.soundName, other.applicationIconBadgeNumber
    )
    (userInfo, category) = (other.userInfo, other.category)
  }

  /// A copy, the same notification.
  open func copy(with zone: NSZone? = nil) -> Any { UILocalNotification(copying: self) }

  /// The request that delivers it, under `identifier`.
  func request(_ identifier: String) -> UNNotificationRequest {
    let content = UNMutableNotificationContent()
    content.title = alertTitle ?? ""
    content.body = alertBody ?? ""
    content.sound = soundName == nil ? nil : .default
    content.badge = applicationIconBadgeNumber == 0 ? nil : NSNumber(value: applicationIconBadgeNumber)
    content.userInfo = userInfo ?? [:]
    content.categoryIdentifier = category ?? ""
    return UNNotificationRequest(identifier: identifier, content: content, trigger: nil)
  }

  /// The seconds between deliveries `repeatInterval` asks for, from `fireDate` in the calendar (a
  /// month and a year as long as the first), at least a minute as iOS asks; nil when it does not
  /// repeat.
  var repeatSeconds: TimeInterval? {
    let units: [(NSCalendar.Unit, Calendar.Component)] = [
      (.year, .year), (.month, .month), (.weekOfYear, .weekOfYear), (.weekOfMonth, .weekOfYear), (.day, .day),
      (.hour, .hour), (.minute, .minute),
    ]
    guard let component = units.first(where: { repeatInterval.contains($0.0) })?.1 else { return nil }
    let start = fireDate ?? Date()
    let next = (repeatCalendar ?? Calendar.current).date(byAdding: component, value: 1, to: start)
    return max(60, next?.timeIntervalSince(start) ?? 60)
  }
}

/// What a notification may do, as UIKit's `UIUserNotificationType`.
public struct UIUserNotificationType: OptionSet, Sendable {
  /// The types' bits.
  public let rawValue: UInt
  /// Makes types from their bits.
  public init(rawValue: UInt) { self.rawValue = rawValue }
  /// Update the badge.
  public static let badge = UIUserNotificationType(rawValue: 1 << 0)
  /// Play a sound.
  public static let sound = UIUserNotificationType(rawValue: 1 << 1)
  /// Show an alert.
  public static let alert = UIUserNotificationType(rawValue: 1 << 2)
}

/// A group of actions a notification offers, as UIKit's `UIUserNotificationCategory` (kept).
open class UIUserNotificationCategory: NSObject, @unchecked Sendable {
  // @unchecked: set up before it is registered, then only read.
  /// Its name, which a notification's `category` gives.
  open var identifier: String?
}

/// What the app asks notifications to do, as UIKit's `UIUserNotificationSettings`.
public final class UIUserNotificationSettings: NSObject, @unchecked Sendable {
  // @unchecked: immutable; the categories are the app's, kept.
  /// What notifications may do.
  public let types: UIUserNotificationType
  /// The categories registered.
  public let categories: Set<UIUserNotificationCategory>?

  /// Settings for `types` and `categories`.
  public init(types: UIUserNotificationType, categories: Set<UIUserNotificationCategory>?) {
    self.types = types
    self.categories = categories
  }
}

/// The app's local notifications in UIKit's form: those scheduled, by the identifier of the
/// request that delivers each, and the settings registered.
enum LocalNotifications {
  /// What the app keeps.
  ///
  /// `@unchecked Sendable`: the notifications are copies taken when they were scheduled, which
  /// only the app's calls read, under the lock.
  struct State: @unchecked Sendable {
    var scheduled: [String: UILocalNotification] = [:]
    var settings: UIUserNotificationSettings?
  }
  static let state = Mutex(State())
}

extension UIApplication {
  /// Delivers `notification` at once, whatever its fire date.
  public func presentLocalNotificationNow(_ notification: UILocalNotification) {
    let request = notification.request("UILocalNotification-" + UUID().uuidString)
    UNUserNotificationCenter.current().schedule(request, after: 0, every: nil)
  }

  /// Schedules a copy of `notification` for its fire date (at once without one or when it is past),
  /// repeating by its `repeatInterval`.
  public func scheduleLocalNotification(_ notification: UILocalNotification) {
    guard let copy = notification.copy() as? UILocalNotification else { return }
    let identifier = "UILocalNotification-" + UUID().uuidString
    LocalNotifications.state.withLock { $0.scheduled[identifier] = copy }
    let delay = copy.fireDate.map { $0.timeIntervalSinceNow } ?? 0
    UNUserNotificationCenter.current().schedule(copy.request(identifier), after: delay, every: copy.repeatSeconds)
  }

  /// The notifications scheduled and not yet delivered (a repeating one until cancelled), as
  /// copies; setting it cancels them all and schedules the ones given.
  public var scheduledLocalNotifications: [UILocalNotification]? {
    get {
      let pending = Set(UNUserNotificationCenter.current().pendingRequests.map(\.identifier))
      return LocalNotifications.state.withLock { state in
        state.scheduled = state.scheduled.filter { pending.contains($0.key) }
        return state.scheduled.values.compactMap { $0.copy() as? UILocalNotification }
      }
    }
    set {
      cancelAllLocalNotifications()
      for notification in newValue ?? [] { scheduleLocalNotification(notification) }
    }
  }

  /// Cancels the scheduled deliveries of `notification` (it, or a copy of it).
  public func cancelLocalNotification(_ notification: UILocalNotification) {
    let identifiers = LocalNotifications.state.withLock { state in
      let matching = state.scheduled.filter { $0.value.identity == notification.identity }.map(\.key)
      for identifier in matching { state.scheduled[identifier] = nil }
      return matching
    }
    UNUserNotificationCenter.current().removePendingNotificationRequests(withIdentifiers: identifiers)
  }

  /// Cancels every scheduled `UILocalNotification`.
  public func cancelAllLocalNotifications() {
    let identifiers = LocalNotifications.state.withLock { state in
      defer { state.scheduled = [:] }
      return Array(state.scheduled.keys)
    }
    UNUserNotificationCenter.current().removePendingNotificationRequests(withIdentifiers: identifiers)
  }

  /// Asks the user to allow what `notificationSettings` says: granted, as
  /// `UNUserNotificationCenter`'s `requestAuthorization` is; the delegate's
  /// `application(_:didRegister:)` follows on the main thread.
  public func registerUserNotificationSettings(_ notificationSettings: UIUserNotificationSettings) {
    LocalNotifications.state.withLock { $0.settings = notificationSettings }
    UNUserNotificationCenter.current().requestAuthorization(options: notificationSettings.types.options) { _, _ in
      DispatchQueue.main.async {
        MainActor.assumeIsolated {
          let app = UIApplication.shared
          app.delegate?.application(app, didRegister: notificationSettings)
        }
      }
    }
  }

  /// The settings last registered, or nil.
  public var currentUserNotificationSettings: UIUserNotificationSettings? {
    LocalNotifications.state.withLock { $0.settings }
  }

  /// The number on the app's icon (kept: there is no icon; the notification center's badge).
  public var applicationIconBadgeNumber: Int {
    get { UNUserNotificationCenter.current().badgeCount }
    set { UNUserNotificationCenter.current().badgeCount = newValue }
  }
}

extension UIUserNotificationType {
  /// The same request as UserNotifications' options.
  fileprivate var options: UNAuthorizationOptions {
    var options: UNAuthorizationOptions = []
    if contains(.badge) { options.insert(.badge) }
    if contains(.sound) { options.insert(.sound) }
    if contains(.alert) { options.insert(.alert) }
    return options
  }
}
