// MisusedUpload: an app that uploads from memory (argument `data`) or from a stream (`stream`) in
// a background session, which iOS refuses with an exception nothing catches: the app stops, and
// its crash report names the exception. The mistake is the point: tests check that it shows here
// as it would on the phone.
import Foundation
import ProtFSKit

@MainActor final class AppDelegate: UIApplicationDelegate {
  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    let configuration = URLSessionConfiguration.background(withIdentifier: "com.example.MisusedUpload")
    let session = URLSession(configuration: configuration)
    var request = URLRequest(url: URL(string: "http://127.0.0.1:9/upload")!)
    request.httpMethod = "POST"
    print("uploading from \(CommandLine.arguments.dropFirst().first ?? "data")")
    let task =
      CommandLine.arguments.dropFirst().first == "stream"
      ? session.uploadTask(withStreamedRequest: request)
      : session.uploadTask(with: request, from: Data("report".utf8))
    task.resume()
    print("not reached")
    return true
  }
}

UIApplication.main(delegate: AppDelegate())
