import Foundation
import ProtFS

/// BGTaskScheduler's requests: registration, submission, launch, expiration and completion.
extension AppLifecycle {
  /// Registers the launch handler of `identifier`: refused (as `register` returns false) for an
  /// identifier the Info.plist does not permit, and (as iOS raises an exception) for one
  /// registered before or after a watched app's launch finished.
  mutating func registerTask(_ identifier: String) -> AppReply {
    guard permittedTaskIdentifiers.contains(identifier) else { return unpermitted(identifier) }
    guard !launchFinished else {
      return .refused(
        "All launch handlers must be registered before application finishes launching ('\(identifier)' came after).",
        .programmingError)
    }
    guard registeredTasks.insert(identifier).inserted else {
      return .refused(
        "Launch handler for task with identifier \(identifier) has already been registered.", .programmingError)
    }
    return .ok()
  }

  /// The refusal of an identifier the Info.plist does not permit (`notPermitted`).
  func unpermitted(_ identifier: String) -> AppReply {
    .refused(
      "The task identifier '\(identifier)' is not in the BGTaskSchedulerPermittedIdentifiers of \(bundleID)'s Info.plist.",
      .notPermitted)
  }

  /// Submits the request `message` describes, as `BGTaskScheduler.submit` does: only a permitted
  /// identifier of an app that declares the kind's background mode and registered its launch
  /// handler (else iOS's exception), at most one refresh and ten
  /// processing requests pending; one of the same identifier is replaced.
  mutating func submitTask(_ message: BackgroundTaskMessage) -> AppReply {
    guard let identifier = message.identifier,
      BackgroundTaskRequest.isValidIdentifier(identifier), let type = message.type
    else { return .refused("The task request is not valid: it needs an identifier and a type.") }
    guard permittedTaskIdentifiers.contains(identifier) else { return unpermitted(identifier) }
    guard backgroundModes.contains(type.requiredMode) else {
      return .refused(
        "A \(type.rawValue) task needs '\(type.requiredMode)' in the UIBackgroundModes of \(bundleID)'s Info.plist.",
        .notPermitted)
    }
    guard registeredTasks.contains(identifier) else {
      return .refused("No launch handler registered for task with identifier \(identifier)", .programmingError)
    }
    var requests = record.taskRequests.filter { $0.identifier != identifier }
    guard requests.filter({ $0.type == type }).count < type.pendingLimit else {
      return .refused(
        "\(bundleID) already has \(type.pendingLimit) \(type.rawValue) task request\(type.pendingLimit == 1 ? "" : "s") pending.",
        .tooManyPendingTaskRequests)
    }
    requests.append(
      BackgroundTaskRequest(
        identifier: identifier, type: type, earliestBeginDate: message.earliestBeginDate,
        requiresNetworkConnectivity: type == .processing ? (message.requiresNetworkConnectivity ?? false) : nil,
        requiresExternalPower: type == .processing ? (message.requiresExternalPower ?? false) : nil))
    record.taskRequests = requests
    save()
    return .ok()
  }

  /// Cancels the pending request `identifier`, or every one (nil); cancelling none does nothing.
  mutating func cancelTasks(_ identifier: String?) -> AppReply {
    record.taskRequests = identifier.map { name in record.taskRequests.filter { $0.identifier != name } } ?? []
    save()
    return .ok()
  }

  /// Runs a pending request as the system does when it decides to: the one `message` names, or the
  /// first of its kind that is due, never before its earliest begin date unless `now`. A
  /// suspended app is resumed; the request leaves the pending ones; the app has the kind's time
  /// to complete it, gets `bgTaskExpiration` a fifth of it (at most 5 s) before the end, and is
  /// killed with a crash report if it has not completed it by then.
  mutating func launchTask(_ message: BackgroundTaskMessage) -> AppReply {
    guard let type = message.type else {
      return .refused("The launch is not valid: it needs the task's type.")
    }
    let request: BackgroundTaskRequest
    switch BackgroundTaskRequest.choose(
      from: record.taskRequests, for: message, type: type, at: now.date, app: bundleID.rawValue)
    {
    case .success(let chosen): request = chosen
    case .failure(let reason): return .refused(reason.message)
    }
    guard runningTasks[request.identifier] == nil else {
      return .refused("The task '\(request.identifier)' of \(bundleID) is already running.")
    }
    record.taskRequests.removeAll { $0.identifier == request.identifier }
    if record.state != .active { wakeIfSuspended() }
    taskToken += 1
    runningTasks[request.identifier] = RunningTask(type: type, start: now.uptime, token: taskToken)
    send(.bgTaskLaunch, identifier: request.identifier, taskType: type)
    let time = timings.time(for: type)
    let end = now.uptime + time
    effects.append(
      .schedule(
        .bgTaskExpiration(identifier: request.identifier, token: taskToken),
        deadline: end - AppTimings.lead(of: time)))
    effects.append(.schedule(.bgTaskEnd(identifier: request.identifier, token: taskToken), deadline: end))
    reschedule()
    return .ok(request.identifier)
  }

  /// Expires the running task `identifier` now: its expiration handler runs, and it must be
  /// completed within a fifth of its time (at most 5 s).
  mutating func expireTask(_ identifier: String) -> AppReply {
    guard let task = runningTasks[identifier] else {
      return .refused("No background task '\(identifier)' of \(bundleID) is running.")
    }
    taskToken += 1
    runningTasks[identifier] = RunningTask(type: task.type, start: task.start, token: taskToken, expired: true)
    send(.bgTaskExpiration, identifier: identifier)
    let lead = AppTimings.lead(of: timings.time(for: task.type))
    effects.append(.schedule(.bgTaskEnd(identifier: identifier, token: taskToken), deadline: now.uptime + lead))
    return .ok()
  }

  /// The app completed the task `identifier` (`setTaskCompleted(success:)`).
  mutating func completeTask(_ identifier: String, success: Bool) -> AppReply {
    guard let task = runningTasks.removeValue(forKey: identifier) else {
      return .refused("No background task '\(identifier)' of \(bundleID) is running.")
    }
    record.lastBackgroundTask = AppRecord.BackgroundTaskResult(
      identifier: identifier, type: task.type, result: success ? "success" : "failure",
      duration: now.uptime - task.start, time: now.date)
    reschedule()
    return .ok()
  }
}
