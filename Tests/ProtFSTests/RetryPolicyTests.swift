import Foundation
import ProtFSDownloads
import ProtFSSystem
import Testing

/// When the engine tries a failed attempt again: the delay doubles from the base to the cap, the
/// retries run out after the configured number, and the final error says how many attempts were
/// made.
@Suite struct RetryPolicyTests {
  /// The policy of a configuration with `retries`, `base` and `cap`.
  static func policy(retries: Int, base: Duration, cap: Duration) -> RetryPolicy {
    var configuration = DownloadSessionConfiguration(
      identifier: "retry", bundleID: "com.example.retry", storePath: "/nonexistent/downloads.sqlite",
      temporaryDirectory: "/nonexistent/Downloads", destinationDirectory: "/nonexistent/Destination")
    configuration.maximumRetries = retries
    configuration.retryBaseDelay = base
    configuration.retryMaximumDelay = cap
    return RetryPolicy(configuration)
  }

  @Test func theConfigurationsValuesAreTakenInNanoseconds() {
    let policy = Self.policy(retries: 3, base: .milliseconds(250), cap: .seconds(8))
    #expect(policy.maximumRetries == 3)
    #expect(policy.baseDelay == 250_000_000)
    #expect(policy.maximumDelay == 8_000_000_000)
  }

  @Test func theDelayDoublesFromTheBaseUpToTheCap() {
    let policy = Self.policy(retries: 10, base: .milliseconds(500), cap: .seconds(5))
    let delays = (1...6).map { policy.delay(afterAttempts: $0) }
    #expect(delays == [500_000_000, 1_000_000_000, 2_000_000_000, 4_000_000_000, 5_000_000_000, 5_000_000_000])
  }

  @Test func theRetriesRunOutAfterTheConfiguredNumber() {
    let policy = Self.policy(retries: 2, base: .seconds(1), cap: .seconds(60))
    // Attempt 1 failed: retry 1; attempt 2 failed: retry 2; attempt 3 failed: no more.
    #expect(policy.delay(afterAttempts: 1) == 1_000_000_000)
    #expect(policy.delay(afterAttempts: 2) == 2_000_000_000)
    #expect(policy.delay(afterAttempts: 3) == nil)
    #expect(policy.delay(afterAttempts: 50) == nil)
  }

  @Test func noRetriesMeansTheFirstFailureIsFinal() {
    let policy = Self.policy(retries: 0, base: .seconds(1), cap: .seconds(60))
    #expect(policy.delay(afterAttempts: 1) == nil)
  }

  @Test func aLongRunOfAttemptsStaysAtTheCapWithoutOverflowing() {
    let policy = Self.policy(retries: 1000, base: .milliseconds(1), cap: .seconds(30))
    for attempts in [31, 32, 64, 65, 1000] {
      #expect(policy.delay(afterAttempts: attempts) == 30_000_000_000)
    }
  }

  @Test func aCapBelowTheBaseWins() {
    let policy = Self.policy(retries: 3, base: .seconds(10), cap: .seconds(2))
    #expect(policy.delay(afterAttempts: 1) == 2_000_000_000)
  }

  @Test(arguments: ["The server answered 503 (Service Unavailable).", "The server answered 503 (Service Unavailable)"])
  func theFinalErrorSaysHowManyAttemptsWereMade(message: String) {
    let error = ProtFSError(.network, message, errno: ECONNRESET, remedy: .advice("try again later"))
    let final = RetryPolicy.gaveUp(error, after: 5)
    #expect(final.message == "The server answered 503 (Service Unavailable) (gave up after 5 attempts).")
    #expect(final.code == error.code)
    #expect(final.errno == ECONNRESET)
    #expect(final.remedy == error.remedy)
  }
}
