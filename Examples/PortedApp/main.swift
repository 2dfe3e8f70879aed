// PortedApp: an iOS app delegate as iOS code writes it, ported by changing `import UIKit` to
// `import ProtFSKit` and nothing else. Built in the Swift 5 language mode, as most iOS apps are.
//
// It prints what iOS would show it: the thread its callbacks run on, its lifecycle in order, a
// main-thread timer that logs the background time left (as the source documents' background
// runner does), its sandbox's paths and bundle id, and the class of the cache directory it makes
// for background downloads.
import Foundation
import ProtFSKit

func say(_ line: String) { FileHandle.standardOutput.write((line + "\n").data(using: .utf8)!) }

class AppDelegate: UIResponder, UIApplicationDelegate {
  var window: UIWindow?
  var backgroundTask: UIBackgroundTaskIdentifier = .invalid
  var timer: Timer?

  func application(
    _ application: UIApplication, willFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    say("willFinishLaunching options=\(launchOptions?.count ?? 0)")
    return true
  }

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    say("didFinishLaunching main=\(Thread.isMainThread) state=\(application.applicationState.rawValue)")
    say("home \(NSHomeDirectory())")
    say("tmp \(NSTemporaryDirectory())")
    say("bundle \(Bundle.main.bundleIdentifier ?? "none")")
    let caches = NSSearchPathForDirectoriesInDomains(.cachesDirectory, .userDomainMask, true)[0]
    say("caches \(caches)")
    let documents = FileManager.default.urls(for: .documentDirectory, in: .userDomainMask)[0]
    say("documents \(documents.path)")
    let support = NSSearchPathForDirectoriesInDomains(.applicationSupportDirectory, .userDomainMask, true)[0]
    say("support \(support)")

    // The fix the source documents give: the session's download directory is created class none,
    // so that the transfer goes on while the device is locked.
    let downloads = caches + "/com.apple.nsurlsessiond/Downloads/" + (Bundle.main.bundleIdentifier ?? "app")
    do {
      try FileManager.default.createDirectory(
        atPath: downloads, withIntermediateDirectories: true,
        attributes: [FileAttributeKey.protectionKey: FileProtectionType.none])
      let attributes = try FileManager.default.attributesOfItem(atPath: downloads)
      let protection = attributes[.protectionKey] as? FileProtectionType
      say("downloads class \(protection?.rawValue ?? "unknown")")
    } catch {
      say("downloads failed: \(error)")
    }
    say("searchable \(FileManager.default.isExecutableFile(atPath: downloads))")
    say("size unknown is \(NSURLSessionTransferSizeUnknown)")
    OperationQueue.main.addOperation { say("main operation main=\(Thread.isMainThread)") }
    return true
  }

  func applicationDidBecomeActive(_ application: UIApplication) {
    say("didBecomeActive state=\(application.applicationState.rawValue)")
  }

  func applicationWillResignActive(_ application: UIApplication) {
    say("willResignActive")
  }

  func applicationDidEnterBackground(_ application: UIApplication) {
    say("didEnterBackground main=\(Thread.isMainThread)")
    backgroundTask = application.beginBackgroundTask(withName: "log") {
      say("expiring")
      self.stopLogging(application)
    }
    timer = Timer.scheduledTimer(withTimeInterval: 0.2, repeats: true) { _ in
      say(String(format: "timer main=%@ remaining %.1f", "\(Thread.isMainThread)", application.backgroundTimeRemaining))
    }
    DispatchQueue.global().async {
      // UIKit code reads this from any queue; in the Swift 5 mode it compiles with a warning.
      let remaining = application.backgroundTimeRemaining
      DispatchQueue.main.async { say("remaining read off the main thread: \(remaining > 0)") }
    }
  }

  func applicationWillEnterForeground(_ application: UIApplication) {
    say("willEnterForeground")
    stopLogging(application)
  }

  func applicationWillTerminate(_ application: UIApplication) {
    say("willTerminate")
  }

  func stopLogging(_ application: UIApplication) {
    timer?.invalidate()
    timer = nil
    if backgroundTask != .invalid {
      application.endBackgroundTask(backgroundTask)
      backgroundTask = .invalid
    }
  }
}

UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil, NSStringFromClass(AppDelegate.self))
