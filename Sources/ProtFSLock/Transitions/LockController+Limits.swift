import Foundation

extension LockController {
  /// The longest grace period a lock accepts: one day. iOS keeps class A keys about 10 s after
  /// the lock; anything near a day is a typo, and a huge value would sleep for ever.
  public static let maximumGrace: TimeInterval = 86_400
}
