import Foundation
import ProtFSKit
import ProtFSTestSupport
import Synchronization
import Testing

/// Local notifications as UserNotifications posts them, with no screen: authorization is granted
/// when asked, a notification is a line on standard error and is listed as delivered.
@Suite(.serialized, .timeLimit(.minutes(1))) struct UserNotificationsTests {
  /// A delegate as apps write one (its methods are never called here: no user taps).
  final class Presenter: NSObject, UNUserNotificationCenterDelegate {
    func userNotificationCenter(
      _ center: UNUserNotificationCenter, willPresent notification: UNNotification,
      withCompletionHandler completionHandler: @escaping (UNNotificationPresentationOptions) -> Void
    ) { completionHandler([.banner, .sound]) }
    func userNotificationCenter(
      _ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse,
      withCompletionHandler completionHandler: @escaping () -> Void
    ) { completionHandler() }
  }

  /// A download app's "finished" notification, as iOS code posts it: nothing before authorization,
  /// at once without a trigger, after its interval with one, and a pending one can be cancelled.
  @Test func aNotificationIsDeliveredOnceAuthorizedAndItsTriggerFires() async throws {
    let center = UNUserNotificationCenter.current()
    let presenter = Presenter()
    center.delegate = presenter
    try await center.setBadgeCount(2)
    center.removeAllDeliveredNotifications()
    let content = UNMutableNotificationContent()
    content.title = "Download complete"
    content.body = "report.pdf is in Documents"
    content.sound = .default
    try await center.add(UNNotificationRequest(identifier: "early", content: content, trigger: nil))
    #expect(await center.deliveredNotifications().isEmpty)
    #expect(try await center.requestAuthorization(options: [.alert, .sound, .badge]))
    #expect(await center.notificationSettings().authorizationStatus == .authorized)
    try await center.add(UNNotificationRequest(identifier: "now", content: content, trigger: nil))
    let later = UNTimeIntervalNotificationTrigger(timeInterval: 0.2, repeats: false)
    try await center.add(UNNotificationRequest(identifier: "later", content: content, trigger: later))
    let cancelled = UNTimeIntervalNotificationTrigger(timeInterval: 60, repeats: false)
    try await center.add(UNNotificationRequest(identifier: "cancelled", content: content, trigger: cancelled))
    center.removePendingNotificationRequests(withIdentifiers: ["cancelled"])
    let delivered = await offPool { () -> [String] in
      let deadline = Date() + 10
      while Date() < deadline {
        let got = Mutex<[String]?>(nil)
        let done = DispatchSemaphore(value: 0)
        center.getDeliveredNotifications { notes in
          got.withLock { $0 = notes.map(\.request.identifier) }
          done.signal()
        }
        done.wait()
        if let ids = got.withLock({ $0 }), ids.count >= 2 { return ids }
        usleep(20_000)
      }
      return []
    }
    #expect(delivered == ["now", "later"])
    let pending = await withCheckedContinuation { done in
      center.getPendingNotificationRequests { done.resume(returning: $0.map(\.identifier)) }
    }
    #expect(pending.isEmpty)
    #expect(center.delegate === presenter)
  }

  /// The notification is "shown" as a line on the app's standard error.
  @Test func aNotificationIsALineOnStandardError() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      let center = UNUserNotificationCenter.current()
      _ = try? await center.requestAuthorization(options: [.alert])
      let content = UNMutableNotificationContent()
      content.title = "Synced"
      content.body = "3 new items"
      try? await center.add(UNNotificationRequest(identifier: "sync", content: content, trigger: nil))
      exit(0)
    }
    let output = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(output.contains("notification \"Synced\": 3 new items"), "\(output)")
  }
}
