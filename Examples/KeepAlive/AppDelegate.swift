// KeepAlive: the source documents' way to stay alive in the background, a silent AVAudioPlayer
// looping in a .playback session (with `audio` in UIBackgroundModes), beside a CLLocationManager
// whose locations the app logs. Ported by changing `import UIKit`, `import AVFoundation` and
// `import CoreLocation` to `import ProtFSKit`; Swift 6 language mode. A timer logs a tick every
// 100 ms while the app runs; a location at 0,0 stops the player, and the app is suspended.
import Foundation
import ProtFSKit

@main
class AppDelegate: UIResponder, UIApplicationDelegate, CLLocationManagerDelegate {
  var player: AVAudioPlayer?
  let locationManager = CLLocationManager()
  var ticks = 0

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    do {
      try AVAudioSession.sharedInstance().setCategory(.playback, mode: .default, options: [.mixWithOthers])
      try AVAudioSession.sharedInstance().setActive(true)
      let silence = Data(count: 44_100)
      player = try AVAudioPlayer(data: silence)
      player?.numberOfLoops = -1
      player?.volume = 0
      player?.play()
    } catch {
      print("audio failed: \(error)")
    }
    locationManager.delegate = self
    locationManager.requestAlwaysAuthorization()
    locationManager.startUpdatingLocation()
    _ = Timer.scheduledTimer(withTimeInterval: 0.1, repeats: true) { _ in
      MainActor.assumeIsolated {
        self.ticks += 1
        print("tick \(self.ticks)")
      }
    }
    print("playing \(player?.isPlaying == true)")
    return true
  }

  func locationManager(_ manager: CLLocationManager, didUpdateLocations locations: [CLLocation]) {
    guard let location = locations.last else { return }
    print("location \(location.coordinate.latitude),\(location.coordinate.longitude)")
    if location.coordinate.latitude == 0 && location.coordinate.longitude == 0 {
      // Said first: once nothing plays, the app is suspended at once.
      print("stopped playing")
      player?.stop()
    }
  }
}
