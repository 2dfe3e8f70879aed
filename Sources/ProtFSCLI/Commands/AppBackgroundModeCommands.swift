import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// The background modes that keep an app running (docs/semantics.md §8): `protfs app location`,
/// simctl's `location set`, from any shell; `protfs app audio` and `protfs app location-updates`,
/// what AVAudioPlayer and CLLocationManager tell the system, for a program not written in Swift.
package enum AppBackgroundModeCommands {
  package static let location = Command(
    name: "location",
    abstract: "Set the device's location for the app, as `simctl location set` does.",
    discussion: """
      An app updating its location (startUpdatingLocation, or `protfs app location-updates`) that
      is not suspended gets didUpdateLocations with LATITUDE,LONGITUDE (degrees). With --file, each
      line of FILE (LATITUDE,LONGITUDE; blank lines and # comments skipped) is one location, sent
      --every DURATION apart (default 1s), as a route played back.
      """,
    arguments: [AppCommand.bundleArgument, coordinate],
    options: [file, every],
    run: runLocation)

  package static let audio = Command(
    name: "audio",
    abstract: "Report that the app plays audio (play) or stopped (stop) (inside an app).",
    discussion: """
      AVAudioPlayer with an active .playback AVAudioSession, for a program not written in Swift:
      while it plays, an app whose Info.plist lists audio in UIBackgroundModes keeps running in the
      background; after stop it is suspended as any app.
      """,
    arguments: [playOrStop],
    run: runAudio)

  package static let locationUpdates = Command(
    name: "location-updates",
    abstract: "Start (foreground or background) or stop updating the app's location (inside an app).",
    discussion: """
      CLLocationManager's startUpdatingLocation (background: with allowsBackgroundLocationUpdates)
      and stopUpdatingLocation, for a program not written in Swift. Locations then arrive as
      didUpdateLocations events; background updates keep an app whose Info.plist lists location in
      UIBackgroundModes running in the background.
      """,
    arguments: [updates],
    run: runLocationUpdates)

  /// `[<latitude,longitude>]`.
  static let coordinate = Argument(
    name: "latitude,longitude", help: "The location in degrees, such as 48.8584,2.2945.", arity: .optional)
  /// `--file FILE`.
  static let file = Option.value("file", "file", help: "A route: one LATITUDE,LONGITUDE a line.")
  /// `--every DURATION`.
  static let every = Option.value("every", "duration", help: "Time between the route's locations (default 1s).")
  /// `<play|stop>`.
  static let playOrStop = Argument(name: "play|stop", help: "play or stop.")
  /// `<foreground|background|stop>`.
  static let updates = Argument(name: "foreground|background|stop", help: "foreground, background or stop.")

  /// The largest route file read.
  static let routeBytes = 8 << 20
  /// The most locations a route may hold.
  static let routeLimit = 100_000

  static func runLocation(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    var points: [String]
    switch (invocation.argument(coordinate), invocation.value(file)) {
    case (let point?, nil): points = [point]
    case (nil, let path?): points = try route(path)
    default: throw invocation.usageError("Give a location (LATITUDE,LONGITUDE) or --file FILE, one of them.")
    }
    var interval = 1.0
    if let text = invocation.value(every) {
      do {
        interval = try AppTimings.duration(text, option: every.long)
      } catch {
        throw invocation.usageError(invocation.describe(error))
      }
    }
    let coordinates = try points.map { point in
      guard let coordinate = AppRequest.Coordinate(point) else {
        throw invocation.usageError("'\(point.prefix(80))' is not a location: give LATITUDE,LONGITUDE in degrees.")
      }
      return coordinate
    }
    for (index, coordinate) in coordinates.enumerated() {
      if index > 0 { Kernel.usleep(UInt32(interval * 1_000_000)) }
      let reply = try AppCommand.send(.location(coordinate), to: bundleID, device: invocation.device)
      switch reply.value {
      case "not updating"?:
        Console.out("The app \(bundleID) is not updating its location: it gets none until it starts.")
      case "suspended"?:
        Console.out("The app \(bundleID) is suspended: it gets no location until it runs again.")
      default: break
      }
    }
    return 0
  }

  /// The locations of the route in `path`.
  static func route(_ path: String) throws -> [String] {
    // At most a few MiB: a route of the most locations is far smaller; a huge file is refused
    // without being read whole.
    let text: String
    switch Kernel.readNamedFile(path, limit: routeBytes) {
    case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
    case .failure(.tooLarge):
      throw ExitStatus(code: 1, message: "The route '\(path)' is larger than \(routeBytes) bytes; give a shorter one.")
    case .failure(let failure):
      throw ExitStatus(code: 1, message: "Cannot read the route '\(path)': \(failure.reason).")
    }
    let points = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
      .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    guard !points.isEmpty, points.count <= routeLimit else {
      throw ExitStatus(
        code: 1, message: "The route '\(path)' holds \(points.count) locations; give 1 to \(routeLimit).")
    }
    return points
  }

  static func runAudio(_ invocation: Invocation) throws -> Int32 {
    let value = invocation.required(playOrStop)
    guard value == "play" || value == "stop" else { throw invocation.usageError("'\(value)' is not play or stop.") }
    try AppHelperCommands.sendWarning(invocation, .audio(playing: value == "play"))
    return 0
  }

  static func runLocationUpdates(_ invocation: Invocation) throws -> Int32 {
    let value = invocation.required(updates)
    guard let updates = AppRequest.LocationUpdates(rawValue: value) else {
      throw invocation.usageError("'\(value)' is not foreground, background or stop.")
    }
    try AppHelperCommands.sendWarning(invocation, .locationUpdates(updates))
    return 0
  }
}
